"""The multicluster role's manifests (tower + KubeFed for a host cluster), rendered by Ansible for spec variants
(no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from installer_state import upstream_objects
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
NS = "kube-federation-system"
HOST = {"multicluster": {"clusterRole": "host"}}
ZONE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
GLOBAL = {"nodeSelector": {"pool": "infra"}, "tolerations": [{"operator": "Exists"}], "affinity": ZONE}
OWN = {"nodeSelector": {"pool": "multicluster"}, "tolerations": [{"key": "mc", "operator": "Exists"}]}
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": HOST,
    "three_nodes": HOST,
    "global_scheduling": {**HOST, **GLOBAL},
    "own_scheduling": {"multicluster": {"clusterRole": "host", **OWN}, **GLOBAL},
    "registry": {**HOST, "local_registry": "registry.local:5000"},
}
FACTS: dict[str, dict[str, Any]] = {
    "three_nodes": {"nodeNum": 3},
    "registry": {"ks_multicluster_webhook_ca": "V0VCSE9PSy1DQQ==", "ks_multicluster_conversion_ca": "S1MtQ0E="},
}
# Not rendered, and why: the chart's post-install hook (it only patched the KubeFedConfig's feature gates, which
# are rendered; Helm deleted it once it succeeded) and the webhook certificate Secret (made by ks_webhook_cert).
HOOK = {("ConfigMap", NS, "kubefed-kubefed-config-hook"), ("Role", NS, "kubefed-config-hook"),
        ("RoleBinding", NS, "kubefed-config-hook"), ("ServiceAccount", NS, "kubefed-config-hook")}
NOT_RENDERED = HOOK | {("Secret", NS, "kubefed-admission-webhook-serving-cert")}
DEPLOYMENTS = [(NS, "kubefed-controller-manager"), (NS, "kubefed-admission-webhook"), ("kubesphere-system", "tower")]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), "nodeNum": 1, **FACTS.get(name, {})}
                 for name, changes in SCENARIOS.items()}
    return render_scenarios("multicluster", "ks_multicluster_objects", scenarios,
                            tmp_path_factory.mktemp("multicluster"))


def deployment(objects: Objects, namespace: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name]
    assert len(found) == 1 and found[0]["metadata"]["namespace"] == namespace
    return found[0]


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    assert len(upstream_objects("multicluster")) == 93  # 94 with the hook Job, whose name upstream randomised
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)), name
        assert keys(objects) == (upstream_objects("multicluster") - NOT_RENDERED) | {("Namespace", "", NS)}, name
    ns = find(rendered["default"], "Namespace", NS)["metadata"]["labels"]
    assert ns == {"kubesphere.io/workspace": "system-workspace", "kubesphere.io/namespace": NS}


def test_tower_as_upstream(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    tower = deployment(objects, "kubesphere-system", "tower")
    assert tower["spec"]["replicas"] == 1
    spec = tower["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "kubesphere"
    (container,) = spec["containers"]
    assert container["image"] == "kubesphere/tower:v0.2.1"
    assert container["command"] == ["/proxy", "--ca-cert=/ca.crt", "--ca-key=/ca.key", "--v=4"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8080, "scheme": "HTTP"}
    assert container["resources"] == {"limits": {"cpu": "500m", "memory": "256Mi"},
                                      "requests": {"cpu": "100m", "memory": "128Mi"}}
    assert (spec["nodeSelector"], spec["tolerations"], spec["affinity"]) == ({}, [], {})
    service = find(objects, "Service", "tower")
    assert service["metadata"]["namespace"] == "kubesphere-system"
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["ports"] == [{"port": 8080, "protocol": "TCP", "targetPort": 8080}]
    assert service["spec"]["selector"] == {"app": "tower"}


def test_kubefed_as_upstreams_chart(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    controller = deployment(objects, NS, "kubefed-controller-manager")
    assert controller["spec"]["replicas"] == 1
    assert deployment(rendered["three_nodes"], NS, "kubefed-controller-manager")["spec"]["replicas"] == 2
    spec = controller["spec"]["template"]["spec"]
    (manager,) = spec["containers"]
    assert manager["image"] == "kubesphere/kubefed:v0.8.1"
    assert manager["command"] == ["/hyperfed/controller-manager", "--v=2", "--rest-config-qps=50",
                                  "--rest-config-burst=100"]
    assert manager["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8080}
    assert spec["serviceAccountName"] == "kubefed-controller" and spec["securityContext"] == {"runAsUser": 1001}
    webhook = deployment(objects, NS, "kubefed-admission-webhook")
    spec = webhook["spec"]["template"]["spec"]
    (server,) = spec["containers"]
    assert server["image"] == "kubesphere/kubefed:v0.8.1"
    assert server["command"] == ["/hyperfed/webhook", "--secure-port=8443", "--cert-dir=/var/serving-cert/", "--v=8"]
    assert server["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8443, "scheme": "HTTPS"}
    assert spec["volumes"][0]["secret"]["secretName"] == "kubefed-admission-webhook-serving-cert"
    service = find(objects, "Service", "kubefed-admission-webhook")["spec"]
    assert service["selector"] == webhook["spec"]["selector"]["matchLabels"]
    assert service["ports"] == [{"port": 443, "targetPort": 8443}]
    metrics = find(objects, "Service", "kubefed-controller-manager-metrics-service")["spec"]
    assert metrics["selector"] == controller["spec"]["selector"]["matchLabels"]
    config = find(objects, "KubeFedConfig", "kubefed")
    assert config["metadata"]["namespace"] == NS
    assert config["spec"]["featureGates"] == [  # as the chart's post-install hook left them
        {"configuration": "Enabled", "name": "PushReconciler"},
        {"configuration": "Disabled", "name": "RawResourceStatusCollection"},
        {"configuration": "Enabled", "name": "SchedulerPreferences"}]
    assert config["spec"]["leaderElect"]["resourceLock"] == "configmaps"
    admin = find(objects, "ClusterRole", "kubefed-admin")
    assert admin["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert len(admin["rules"]) == 4
    viewer = find(objects, "RoleBinding", "kubefed-admission-webhook:apiextension-viewer")
    assert viewer["metadata"]["namespace"] == "kube-system"


def test_webhooks(rendered: dict[str, Objects]) -> None:
    validating = find(rendered["default"], "ValidatingWebhookConfiguration", "validations.core.kubefed.io")
    assert [(w["name"], w["clientConfig"]["service"]["path"], w["failurePolicy"])
            for w in validating["webhooks"]] == [
        ("federatedtypeconfigs.core.kubefed.io", "/validate-federatedtypeconfigs", "Fail"),
        ("kubefedclusters.core.kubefed.io", "/validate-kubefedcluster", "Fail"),
        ("kubefedconfigs.core.kubefed.io", "/validate-kubefedconfig", "Fail")]
    mutating = find(rendered["registry"], "MutatingWebhookConfiguration", "mutation.core.kubefed.io")
    (hook,) = mutating["webhooks"]
    assert hook["clientConfig"] == {"service": {"namespace": NS, "name": "kubefed-admission-webhook",
                                                "path": "/default-kubefedconfig"}, "caBundle": "V0VCSE9PSy1DQQ=="}
    assert hook["rules"][0]["operations"] == ["CREATE"]


def test_federated_types(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    configs = [o for o in objects if o["kind"] == "FederatedTypeConfig"]
    crds = {o["metadata"]["name"]: o for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert len(configs) == 28 and len(crds) == 35
    for config in configs:
        federated = config["spec"]["federatedType"]
        assert config["metadata"]["namespace"] == NS
        crd = crds[f"{federated['pluralName']}.types.kubefed.io"]["spec"]
        assert (crd["names"]["kind"], crd["scope"]) == (federated["kind"], federated["scope"])
        assert [v["name"] for v in crd["versions"] if v["storage"]] == [federated["version"]]
        assert all("subresources" in v for v in crd["versions"])
    namespaces = find(objects, "FederatedTypeConfig", "namespaces")["spec"]
    assert namespaces["targetType"] == {"kind": "Namespace", "pluralName": "namespaces", "scope": "Cluster",
                                        "version": "v1"}
    assert namespaces["federatedType"]["scope"] == "Namespaced"
    workspaces = find(objects, "FederatedTypeConfig", "workspaces.tenant.kubesphere.io")["spec"]["targetType"]
    assert workspaces["group"] == "tenant.kubesphere.io" and workspaces["version"] == "v1alpha1"
    receivers = find(objects, "FederatedTypeConfig", "receivers.notification.kubesphere.io")["spec"]
    assert receivers["federatedType"]["version"] == "v1beta2" and receivers["targetType"]["version"] == "v2beta2"
    assert crds["federatedconfigmaps.types.kubefed.io"]["spec"]["names"]["shortNames"] == ["fcm"]
    assert crds["federatedtypeconfigs.core.kubefed.io"]["spec"]["names"]["shortNames"] == ["ftc"]
    assert "subresources" not in crds["kubefedconfigs.core.kubefed.io"]["spec"]["versions"][0]
    fns = find(objects, "FederatedNamespace", "kubesphere-monitoring-federated")
    assert fns["metadata"]["namespace"] == "kubesphere-monitoring-federated"
    assert fns["spec"]["template"]["metadata"]["labels"] == {"kubesphere.io/workspace": "system-workspace"}


def test_conversion_webhook_of_the_two_version_notification_types(rendered: dict[str, Objects]) -> None:
    for name in ("federatednotificationconfigs", "federatednotificationreceivers"):
        spec = find(rendered["registry"], "CustomResourceDefinition", f"{name}.types.kubefed.io")["spec"]
        assert [(v["name"], v["storage"]) for v in spec["versions"]] == [("v1beta1", False), ("v1beta2", True)]
        assert spec["conversion"] == {"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"name": "ks-controller-manager", "namespace": "kubesphere-system",
                                         "path": "/convert"}, "caBundle": "S1MtQ0E="},
            "conversionReviewVersions": ["v1", "v1beta1"]}}
        default = find(rendered["default"], "CustomResourceDefinition", f"{name}.types.kubefed.io")["spec"]
        assert "caBundle" not in default["conversion"]["webhook"]["clientConfig"]  # no CA read: none claimed
    router = find(rendered["default"], "CustomResourceDefinition", "federatednotificationrouters.types.kubefed.io")
    assert "conversion" not in router["spec"]


@pytest.mark.parametrize("scenario", ["global_scheduling", "own_scheduling"])
def test_scheduling_from_multicluster_then_global(rendered: dict[str, Objects], scenario: str) -> None:
    for namespace, name in DEPLOYMENTS:
        spec = deployment(rendered[scenario], namespace, name)["spec"]["template"]["spec"]
        if scenario == "global_scheduling":
            assert (spec["nodeSelector"], spec["tolerations"], spec["affinity"]) == (
                GLOBAL["nodeSelector"], GLOBAL["tolerations"], ZONE), name
        else:  # multicluster's own fields win; the global affinity fills the field it leaves unset
            assert (spec["nodeSelector"], spec["tolerations"], spec["affinity"]) == (
                OWN["nodeSelector"], OWN["tolerations"], ZONE), name


def test_local_registry(rendered: dict[str, Objects]) -> None:
    images = {name: pod(rendered["registry"], "Deployment", name)["containers"][0]["image"]
              for _, name in DEPLOYMENTS}
    assert images == {"kubefed-controller-manager": "registry.local:5000/kubesphere/kubefed:v0.8.1",
                      "kubefed-admission-webhook": "registry.local:5000/kubesphere/kubefed:v0.8.1",
                      "tower": "registry.local:5000/kubesphere/tower:v0.2.1"}
