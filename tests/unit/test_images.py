"""The image catalogue of kubesphere-defaults and how local_registry, namespace_override and zone apply."""

from __future__ import annotations

from pathlib import Path

import yaml
from role_harness import filter_plugins

ROLE = Path(__file__).resolve().parents[2] / "roles" / "kubesphere-defaults"
CATALOGUE = yaml.safe_load((ROLE / "defaults" / "main.yaml").read_text())["ks_images"]


f = filter_plugins("kubesphere-defaults", "ks_images")
IMAGES = {"ks_apiserver": {"repo": "kubesphere/ks-apiserver", "tag": "v3.4.1"},
          "prometheus": {"repo": "prom/prometheus", "tag": "v2.39.1"},
          "alpine": {"repo": "alpine", "tag": "3.14"},
          "argocd": {"repo": "quay.io/argoproj/argocd", "tag": "v2.3.3"}}


def test_catalogue_has_the_v3_4_1_images() -> None:
    refs = {k: f"{v['repo']}:{v['tag']}" for k, v in CATALOGUE.items()}
    for key in ("ks_apiserver", "ks_console", "ks_controller_manager"):
        assert refs[key] == f"kubesphere/{key.replace('_', '-')}:{{{{ ks_version }}}}"
    assert {k: refs[k] for k in ("kubectl", "prometheus", "prometheus_operator", "prometheus_config_reloader",
                                 "kube_state_metrics", "node_exporter", "alertmanager", "kube_rbac_proxy")} == {
        "kubectl": "kubesphere/kubectl:v1.22.0",
        "prometheus": "prom/prometheus:v2.39.1",
        "prometheus_operator": "kubesphere/prometheus-operator:v0.55.1",
        "prometheus_config_reloader": "kubesphere/prometheus-config-reloader:v0.55.1",
        "kube_state_metrics": "kubesphere/kube-state-metrics:v2.6.0",
        "node_exporter": "prom/node-exporter:v1.3.1",
        "alertmanager": "prom/alertmanager:v0.23.0",
        "kube_rbac_proxy": "kubesphere/kube-rbac-proxy:v0.11.0",
    }


def test_public_registry_by_default() -> None:
    assert f.ks_image_refs(IMAGES) == {"ks_apiserver": "kubesphere/ks-apiserver:v3.4.1",
                                       "prometheus": "prom/prometheus:v2.39.1", "alpine": "alpine:3.14",
                                       "argocd": "quay.io/argoproj/argocd:v2.3.3"}


def test_local_registry_prefixes_and_namespace_override_replaces_the_namespace() -> None:
    assert f.ks_image_refs(IMAGES, "reg.local:5000") == {
        "ks_apiserver": "reg.local:5000/kubesphere/ks-apiserver:v3.4.1",
        "prometheus": "reg.local:5000/prom/prometheus:v2.39.1", "alpine": "reg.local:5000/alpine:3.14",
        "argocd": "reg.local:5000/argoproj/argocd:v2.3.3"}
    assert f.ks_image_refs(IMAGES, "reg.local/", "mirror") == {
        "ks_apiserver": "reg.local/mirror/ks-apiserver:v3.4.1",
        "prometheus": "reg.local/mirror/prometheus:v2.39.1", "alpine": "reg.local/mirror/alpine:3.14",
        "argocd": "reg.local/mirror/argocd:v2.3.3"}
    assert f.ks_image_refs(IMAGES, "", "mirror")["prometheus"] == "mirror/prometheus:v2.39.1"


def test_zone_cn_uses_the_aliyun_mirror() -> None:
    cn = "registry.cn-beijing.aliyuncs.com/kubesphereio/"
    assert f.ks_image_refs(IMAGES, zone="cn")["prometheus"] == cn + "prometheus:v2.39.1"
    assert f.ks_image_refs(IMAGES, "registry.cn-beijing.aliyuncs.com")["ks_apiserver"] == cn + "ks-apiserver:v3.4.1"
    # Explicit settings win over the zone.
    assert f.ks_image_refs(IMAGES, "reg.local", zone="cn")["ks_apiserver"] == \
        "reg.local/kubesphereio/ks-apiserver:v3.4.1"
    assert f.ks_image_refs(IMAGES, "", "mine", "cn")["ks_apiserver"] == \
        "registry.cn-beijing.aliyuncs.com/mine/ks-apiserver:v3.4.1"
