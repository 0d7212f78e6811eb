"""The ks-monitor role's manifests, rendered by Ansible for several specs (no cluster needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_harness import filter_plugins, run_play

from installer.config.defaults import apply_defaults
from installer.manifests import parse_kind

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "ks-monitor"
CERTS = "/etc/prometheus/secrets/kube-etcd-client-certs/"
ETCD_ON = {"monitoring": True, "endpointIps": "10.0.0.1, 10.0.0.2", "port": 2379, "tlsEnable": True}

# name → (spec changes, extra variables)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {}),
    "three_nodes": ({}, {"nodeNum": 3}),
    "tuned": ({"monitoring": {"storageClass": "fast", "node_exporter": {"port": 9200},
                              "prometheus": {"replicas": 3, "volumeSize": "50Gi",
                                             "resources": {"limits": {"cpu": "2"}}},
                              "alertmanager": {"replicas": 2}},
               "persistence": {"storageClass": "slow"}, "nodeSelector": {"role": "monitoring"},
               "local_registry": "registry.local:5000", "namespace_override": "mirror"}, {}),
    "persistence_class": ({"persistence": {"storageClass": "slow"}}, {}),
    "etcd_certs_missing": ({"etcd": ETCD_ON}, {"ks_monitor_etcd_certs_missing": ["etcd-client.key"]}),
    "etcd_certs_ready": ({"etcd": ETCD_ON}, {}),
    "etcd_plain": ({"etcd": {**ETCD_ON, "tlsEnable": False}}, {}),
    "external": ({"common": {"monitoring": {"type": "external", "endpoint": "http://prom.example:9090"}},
                  "etcd": ETCD_ON}, {}),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("ks-monitor")
    tasks = []
    for name, (changes, extra) in SCENARIOS.items():
        variables = {**apply_defaults(changes), "nodeNum": 1, **extra}
        tasks += [{"ansible.builtin.include_role": {"name": "ks-monitor", "tasks_from": "render"}, "vars": variables},
                  {"ansible.builtin.copy": {"content": "{{ ks_monitor_objects | to_json }}",
                                            "dest": str(out / f"{name}.json")}}]
    play = {"hosts": "localhost", "gather_facts": False, "roles": ["kubesphere-defaults"], "tasks": tasks,
            "vars": {"ks_module": "monitoring", "ks_namespace": "kubesphere-system"}}
    run_play(play, out)
    return {name: json.loads((out / f"{name}.json").read_text()) for name in SCENARIOS}


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    return next((o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name), None)


def containers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in obj["spec"]["template"]["spec"]["containers"]}


def test_default_stack_objects(rendered: dict[str, list[dict[str, Any]]]) -> None:
    objects = rendered["default"]
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert {f"{p}.monitoring.coreos.com" for p in ("prometheuses", "alertmanagers", "servicemonitors", "podmonitors",
                                                   "prometheusrules", "thanosrulers", "probes",
                                                   "alertmanagerconfigs")} <= crds
    for kind, name in [("Namespace", "kubesphere-monitoring-system"), ("Deployment", "prometheus-operator"),
                       ("Deployment", "kube-state-metrics"), ("DaemonSet", "node-exporter"),
                       ("Prometheus", "k8s"), ("Alertmanager", "main"), ("Secret", "alertmanager-main"),
                       ("ServiceMonitor", "ks-apiserver"), ("ServiceMonitor", "ks-controller-manager")]:
        assert find(objects, kind, name), f"{kind}/{name} not rendered"
    # Prometheus selects ServiceMonitors by the vendor label, so every one of them must carry it.
    for sm in (o for o in objects if o["kind"] == "ServiceMonitor"):
        assert sm["metadata"]["labels"]["app.kubernetes.io/vendor"] == "kubesphere"
    operator = containers(find(objects, "Deployment", "prometheus-operator"))
    assert operator["prometheus-operator"]["image"] == "kubesphere/prometheus-operator:v0.55.1"
    assert "--prometheus-config-reloader=kubesphere/prometheus-config-reloader:v0.55.1" in \
        operator["prometheus-operator"]["args"]
    assert not any(o["metadata"]["name"] == "etcd" for o in objects)


def test_prometheus_defaults(rendered: dict[str, list[dict[str, Any]]]) -> None:
    spec = find(rendered["default"], "Prometheus", "k8s")["spec"]
    assert spec["replicas"] == 1
    assert find(rendered["three_nodes"], "Prometheus", "k8s")["spec"]["replicas"] == 2
    assert spec["retention"] == "7d"
    assert spec["image"] == "prom/prometheus:v2.39.1"
    claim = spec["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == "20Gi"
    assert "storageClassName" not in claim
    assert "resources" not in spec and "secrets" not in spec and "nodeSelector" not in spec
    assert find(rendered["default"], "Alertmanager", "main")["spec"]["replicas"] == 1
    persistence = find(rendered["persistence_class"], "Prometheus", "k8s")["spec"]
    assert persistence["storage"]["volumeClaimTemplate"]["spec"]["storageClassName"] == "slow"


def test_spec_settings_reach_the_objects(rendered: dict[str, list[dict[str, Any]]]) -> None:
    objects = rendered["tuned"]
    spec = find(objects, "Prometheus", "k8s")["spec"]
    assert spec["replicas"] == 3
    assert spec["resources"] == {"limits": {"cpu": "2"}}
    claim = spec["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "fast"  # monitoring.storageClass wins over persistence.storageClass
    assert claim["resources"]["requests"]["storage"] == "50Gi"
    assert spec["nodeSelector"] == {"role": "monitoring"}
    assert spec["image"] == "registry.local:5000/mirror/prometheus:v2.39.1"
    assert find(objects, "Alertmanager", "main")["spec"]["replicas"] == 2
    proxy = containers(find(objects, "DaemonSet", "node-exporter"))["kube-rbac-proxy"]
    assert proxy["ports"] == [{"name": "https", "containerPort": 9200, "hostPort": 9200}]
    assert proxy["image"] == "registry.local:5000/mirror/kube-rbac-proxy:v0.11.0"
    ksm = find(objects, "Deployment", "kube-state-metrics")["spec"]["template"]["spec"]
    assert ksm["nodeSelector"] == {"role": "monitoring"}


def test_etcd_secret_is_mounted_only_once_it_has_the_certificates(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    missing = rendered["etcd_certs_missing"]
    assert "secrets" not in find(missing, "Prometheus", "k8s")["spec"]
    assert not any(o["metadata"]["name"] == "etcd" for o in missing)

    ready = rendered["etcd_certs_ready"]
    assert find(ready, "Prometheus", "k8s")["spec"]["secrets"] == ["kube-etcd-client-certs"]
    endpoints = find(ready, "Endpoints", "etcd")
    assert endpoints["metadata"]["namespace"] == "kube-system"
    assert endpoints["subsets"] == [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                                     "ports": [{"name": "metrics", "port": 2379, "protocol": "TCP"}]}]
    service = find(ready, "Service", "etcd")
    assert service["metadata"]["namespace"] == "kube-system" and "selector" not in service["spec"]
    monitor = find(ready, "ServiceMonitor", "etcd")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == {
        "caFile": CERTS + "etcd-client-ca.crt", "certFile": CERTS + "etcd-client.crt",
        "keyFile": CERTS + "etcd-client.key"}


def test_etcd_without_tls_needs_no_secret(rendered: dict[str, list[dict[str, Any]]]) -> None:
    objects = rendered["etcd_plain"]
    assert "secrets" not in find(objects, "Prometheus", "k8s")["spec"]
    assert find(objects, "ServiceMonitor", "etcd")["spec"]["endpoints"] == [
        {"interval": "1m", "port": "metrics", "scheme": "http"}]


def test_external_prometheus_keeps_only_kubesphere_objects(rendered: dict[str, list[dict[str, Any]]]) -> None:
    objects = rendered["external"]
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} == {
        ("Namespace", "kubesphere-monitoring-system"),
        ("CustomResourceDefinition", "dashboards.monitoring.kubesphere.io"),
        ("CustomResourceDefinition", "clusterdashboards.monitoring.kubesphere.io")}


def test_prune_and_uninstall_cover_every_rendered_kind(rendered: dict[str, list[dict[str, Any]]]) -> None:
    kinds = {parse_kind(k) for k in yaml.safe_load((ROLE / "defaults" / "main.yaml").read_text())["ks_monitor_kinds"]}
    for objects in rendered.values():
        assert {(o["apiVersion"], o["kind"]) for o in objects} <= kinds


def test_endpoint_ip_filters() -> None:
    f = filter_plugins("ks-monitor", "ks_monitor")
    assert f.ks_split(" 10.0.0.1 ,10.0.0.2,, ") == ["10.0.0.1", "10.0.0.2"]
    assert f.ks_split(["10.0.0.1"]) == ["10.0.0.1"]
    assert f.ks_bad_endpoint_ips("10.0.0.1,fd00::1") == []
    assert f.ks_bad_endpoint_ips("localhost, 127.0.0.1, 169.254.0.1, etcd-0, 10.0.0.1") == [
        "localhost", "127.0.0.1", "169.254.0.1", "etcd-0"]
    assert set(f.FilterModule().filters()) == {"ks_split", "ks_bad_endpoint_ips"}
