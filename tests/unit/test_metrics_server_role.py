"""The metrics-server role's manifests, rendered by Ansible for several specs (no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from installer_state import upstream_objects
from role_harness import Objects, engine_vars, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "metrics-server"
NS = "kube-system"
LABELS = {"k8s-app": "metrics-server"}
IMAGE = "kubesphere/metrics-server:v0.4.2"
TOLERATE_ALL = [{"operator": "Exists"}]
ZONE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
SPOT_AFFINITY = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 50, "preference": {"matchExpressions": [{"key": "spot", "operator": "NotIn", "values": ["true"]}]}}]}}
ON = {"enabled": True}
GLOBAL = {"nodeSelector": {"global": "yes"}, "tolerations": [{"key": "global", "operator": "Exists"}],
          "affinity": ZONE_AFFINITY}

SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {"metrics_server": ON},
    "registry": {"metrics_server": ON, "local_registry": "registry.local:5000", "namespace_override": "mirror"},
    "zone_cn": {"metrics_server": ON, "zone": "cn"},
    "global_scheduling": {"metrics_server": ON, **GLOBAL},
    "module_scheduling": {"metrics_server": {**ON, "nodeSelector": {"ms": "yes"}, "tolerations": TOLERATE_ALL,
                                             "affinity": SPOT_AFFINITY}, **GLOBAL},
    "mixed_scheduling": {"metrics_server": {**ON, "tolerations": TOLERATE_ALL}, **GLOBAL},
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: apply_defaults(changes) for name, changes in SCENARIOS.items()}
    return render_scenarios("metrics-server", "ks_metrics_server_objects", scenarios,
                            tmp_path_factory.mktemp("metrics-server"), engine_vars("metrics_server"))


def images(objects: Objects) -> set[str]:
    return {c["image"] for o in objects if o["kind"] == "Deployment"
            for c in o["spec"]["template"]["spec"]["containers"]}


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    for objects in rendered.values():
        assert keys(objects) == upstream_objects("metrics_server")
        assert len(objects) == len(keys(objects)), "an object is rendered twice"
        for obj in objects:
            assert obj["metadata"]["labels"]["k8s-app"] == "metrics-server", obj["metadata"]["name"]
            assert ("namespace" in obj["metadata"]) == (obj["kind"] in ("ServiceAccount", "RoleBinding", "Service",
                                                                          "Deployment"))


def test_rbac(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    subject = [{"kind": "ServiceAccount", "name": "metrics-server", "namespace": NS}]
    reader = find(objects, "ClusterRole", "system:aggregated-metrics-reader")
    assert {k: v for k, v in reader["metadata"]["labels"].items() if k.startswith("rbac")} == {
        f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in ("admin", "edit", "view")}
    assert reader["rules"] == [{"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"],
                                "verbs": ["get", "list", "watch"]}]
    assert find(objects, "ClusterRole", "system:metrics-server")["rules"] == [
        {"apiGroups": [""], "resources": ["pods", "nodes", "nodes/stats", "namespaces", "configmaps"],
         "verbs": ["get", "list", "watch"]}]
    binding = find(objects, "RoleBinding", "metrics-server-auth-reader")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "extension-apiserver-authentication-reader"}
    assert binding["subjects"] == subject
    for name, role in (("metrics-server:system:auth-delegator", "system:auth-delegator"),
                       ("system:metrics-server", "system:metrics-server")):
        crb = find(objects, "ClusterRoleBinding", name)
        assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
        assert crb["subjects"] == subject


def test_service_deployment_and_apiservice(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    service = find(objects, "Service", "metrics-server")["spec"]
    assert service == {"selector": LABELS,
                       "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}]}
    deployment = find(objects, "Deployment", "metrics-server")["spec"]
    assert "replicas" not in deployment  # 1, the API's default, as upstream
    assert deployment["selector"] == {"matchLabels": LABELS}
    assert deployment["strategy"] == {"rollingUpdate": {"maxUnavailable": 0}}
    assert deployment["template"]["metadata"]["labels"] == LABELS
    spec = deployment["template"]["spec"]
    assert spec["hostNetwork"] is True
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["serviceAccountName"] == "metrics-server"
    assert spec["volumes"] == [{"name": "tmp-dir", "emptyDir": {}}]
    (container,) = spec["containers"]
    assert container["name"] == "metrics-server" and container["image"] == IMAGE
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["args"][:5] == ["--cert-dir=/tmp", "--secure-port=4443",
                                     "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
                                     "--kubelet-use-node-status-port", "--kubelet-insecure-tls"]
    assert container["args"][5].startswith("--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,")
    assert container["args"][5].count(",") == 8 and len(container["args"]) == 6
    assert container["ports"] == [{"name": "https", "containerPort": 4443, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        assert container[probe] == {"failureThreshold": 3, "periodSeconds": 10,
                                    "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"}}
    assert container["securityContext"] == {"readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 1000}
    assert container["volumeMounts"] == [{"mountPath": "/tmp", "name": "tmp-dir"}]
    assert "resources" not in container  # upstream set none
    apiservice = find(objects, "APIService", "v1beta1.metrics.k8s.io")
    assert apiservice["apiVersion"] == "apiregistration.k8s.io/v1"
    assert apiservice["spec"] == {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                                  "versionPriority": 100, "insecureSkipTLSVerify": True,
                                  "service": {"name": "metrics-server", "namespace": NS}}


def test_images_come_from_the_catalogue(rendered: dict[str, Objects]) -> None:
    assert images(rendered["default"]) == {IMAGE}
    assert images(rendered["registry"]) == {"registry.local:5000/mirror/metrics-server:v0.4.2"}
    assert images(rendered["zone_cn"]) == {"registry.cn-beijing.aliyuncs.com/kubesphereio/metrics-server:v0.4.2"}


def test_scheduling(rendered: dict[str, Objects]) -> None:
    default = pod(rendered["default"], "Deployment", "metrics-server")
    assert default["nodeSelector"] == {"kubernetes.io/os": "linux"}
    # Upstream's `affinity: {}` (kept by the API server: the pod template, and so its hash, as upstream's) and
    # `tolerations: []` (dropped by the API server).
    assert default["affinity"] == {} and "tolerations" not in default
    glob = pod(rendered["global_scheduling"], "Deployment", "metrics-server")
    assert (glob["nodeSelector"], glob["tolerations"], glob["affinity"]) == (
        GLOBAL["nodeSelector"], GLOBAL["tolerations"], GLOBAL["affinity"])
    module = pod(rendered["module_scheduling"], "Deployment", "metrics-server")
    assert (module["nodeSelector"], module["tolerations"], module["affinity"]) == (
        {"ms": "yes"}, TOLERATE_ALL, SPOT_AFFINITY)
    mixed = pod(rendered["mixed_scheduling"], "Deployment", "metrics-server")  # field by field
    assert (mixed["nodeSelector"], mixed["tolerations"], mixed["affinity"]) == (
        GLOBAL["nodeSelector"], TOLERATE_ALL, GLOBAL["affinity"])


def test_uninstall_deletes_the_inventory_apiservice_first() -> None:
    from installer.objects.refs import stage

    # The APIService is of the last apply stage, which an uninstall deletes first (and waits for).
    assert stage("apiregistration.k8s.io/v1", "APIService") > stage("apps/v1", "Deployment")
    uninstall = yaml.safe_load((ROLE / "tasks" / "uninstall.yaml").read_text())
    assert [t["ks_manifest"]["state"] for t in uninstall] == ["absent"]


def test_an_old_helm_release_is_taken_over_not_uninstalled() -> None:
    """No role runs Helm: an old release's objects are applied over in place and the engine retires its records
    once the module's run succeeded (installer.engine.adoption.RELEASES), so nothing is deleted and no pod restarts."""
    from installer.engine.adoption import RELEASES
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yaml").read_text())
    assert not [t for t in tasks if "ansible.builtin.include_role" in t or "ansible.builtin.command" in t]
    assert not (ROLE.parent / "kubesphere-defaults" / "tasks" / "helm-releases-absent.yaml").exists()
    for path in ROLE.parent.glob("*/tasks/*.yaml"):
        assert "helm-releases-absent" not in path.read_text(), path
    # The releases the roles used to uninstall first, each retired by the module that makes their objects now.
    assert {k: RELEASES.get(k) for k in (
        (NS, "metrics-server"), ("kubesphere-logging-system", "ks-events"),
        ("kubesphere-logging-system", "kube-auditing"), ("kubesphere-logging-system", "logsidecar-injector"),
        ("kube-federation-system", "kubefed"), ("istio-system", "jaeger-operator"),
        ("istio-system", "kiali-operator"), ("gatekeeper-system", "gatekeeper"), ("kubeedge", "cloudcore"),
        ("kubeedge", "kubeedge"), ("argocd", "devops"))} == {
        (NS, "metrics-server"): "metrics_server", ("kubesphere-logging-system", "ks-events"): "events",
        ("kubesphere-logging-system", "kube-auditing"): "auditing",
        ("kubesphere-logging-system", "logsidecar-injector"): "logging",
        ("kube-federation-system", "kubefed"): "multicluster", ("istio-system", "jaeger-operator"): "servicemesh",
        ("istio-system", "kiali-operator"): "servicemesh", ("gatekeeper-system", "gatekeeper"): "gatekeeper",
        ("kubeedge", "cloudcore"): "edgeruntime", ("kubeedge", "kubeedge"): "edgeruntime",
        ("argocd", "devops"): "devops"}
