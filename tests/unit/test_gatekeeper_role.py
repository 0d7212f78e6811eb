"""The gatekeeper role's manifests, rendered by Ansible for spec variants (no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from installer_state import upstream_objects
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
NS = "gatekeeper-system"
ON = {"gatekeeper": {"enabled": True}}
ZONE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": ON,
    "resources": {"gatekeeper": {"enabled": True,
                                 "controller_manager": {"resources": {"limits": {"memory": "1Gi"},
                                                                      "requests": {"cpu": "200m"}}},
                                 "audit": {"resources": {"limits": {"cpu": "500m"}}}}},
    "global_scheduling": {**ON, "nodeSelector": {"pool": "infra"}, "tolerations": [{"operator": "Exists"}],
                          "affinity": ZONE},
    "registry": {**ON, "local_registry": "registry.local:5000"},
}
# Not rendered, and why: the chart's post-install hook objects (deleted by Helm once they succeeded: the namespace
# label they set is rendered on the namespace) and the PodSecurityPolicy (removed in Kubernetes 1.25).
GONE = {("PodSecurityPolicy", "", "gatekeeper-admin")} | {
    (kind, NS, "gatekeeper-update-namespace-label") for kind in ("Job", "Role", "RoleBinding", "ServiceAccount")}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: apply_defaults(changes) for name, changes in SCENARIOS.items()}
    return render_scenarios("gatekeeper", "ks_gatekeeper_objects", scenarios, tmp_path_factory.mktemp("gatekeeper"))


def test_objects_are_upstreams_for_current_kubernetes(rendered: dict[str, Objects]) -> None:
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)), name
        assert keys(objects) == (upstream_objects("gatekeeper") - GONE) | {("Namespace", "", NS)}, name
    objects = rendered["default"]
    assert find(objects, "PodDisruptionBudget", "gatekeeper-controller-manager")["apiVersion"] == "policy/v1"
    rules = find(objects, "ClusterRole", "gatekeeper-manager-role")["rules"]
    assert not any("podsecuritypolicies" in r["resources"] for r in rules)
    ns = find(objects, "Namespace", NS)["metadata"]["labels"]
    assert ns["admission.gatekeeper.sh/ignore"] == "no-self-managing"
    assert ns["kubesphere.io/workspace"] == "system-workspace"


def test_deployments_as_upstream(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    webhook = find(objects, "Deployment", "gatekeeper-controller-manager")
    assert webhook["spec"]["replicas"] == 3
    spec = pod(objects, "Deployment", "gatekeeper-controller-manager")
    (manager,) = spec["containers"]
    assert manager["image"] == "openpolicyagent/gatekeeper:v3.5.2"
    assert "--exempt-namespace=gatekeeper-system" in manager["args"] and "--port=8443" in manager["args"]
    assert manager["resources"] == {"limits": {"cpu": "1000m", "memory": "512Mi"},
                                    "requests": {"cpu": "100m", "memory": "256Mi"}}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 100
    assert spec["volumes"][0]["secret"]["secretName"] == "gatekeeper-webhook-server-cert"
    audit = pod(objects, "Deployment", "gatekeeper-audit")
    assert "--operation=audit" in audit["containers"][0]["args"] and audit["affinity"] == {}  # upstream's
    # The pods keep Helm's heritage label (the selectors do not select it): the original's ReplicaSets are adopted.
    for name in ("gatekeeper-controller-manager", "gatekeeper-audit"):
        deployment = find(objects, "Deployment", name)["spec"]
        assert deployment["template"]["metadata"]["labels"]["heritage"] == "Helm"
        assert "heritage" not in deployment["selector"]["matchLabels"]
    service = find(objects, "Service", "gatekeeper-webhook-service")["spec"]
    assert service["selector"] == webhook["spec"]["selector"]["matchLabels"]
    webhook_config = find(objects, "ValidatingWebhookConfiguration", "gatekeeper-validating-webhook-configuration")
    webhooks = webhook_config["webhooks"]
    assert [(w["name"], w["failurePolicy"]) for w in webhooks] == [
        ("validation.gatekeeper.sh", "Ignore"), ("check-ignore-label.gatekeeper.sh", "Ignore")]
    assert all("caBundle" not in w["clientConfig"] for w in webhooks)  # Gatekeeper's cert rotation fills it
    assert "data" not in find(objects, "Secret", "gatekeeper-webhook-server-cert")


def test_resources_each_from_its_own_section(rendered: dict[str, Objects]) -> None:
    objects = rendered["resources"]
    manager = pod(objects, "Deployment", "gatekeeper-controller-manager")["containers"][0]["resources"]
    assert manager == {"limits": {"cpu": "1000m", "memory": "1Gi"}, "requests": {"cpu": "200m", "memory": "256Mi"}}
    audit = pod(objects, "Deployment", "gatekeeper-audit")["containers"][0]["resources"]
    assert audit == {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}


def test_global_scheduling_and_registry(rendered: dict[str, Objects]) -> None:
    for name in ("gatekeeper-controller-manager", "gatekeeper-audit"):
        spec = pod(rendered["global_scheduling"], "Deployment", name)
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "pool": "infra"}
        assert spec["tolerations"] == [{"operator": "Exists"}] and spec["affinity"] == ZONE
        image = pod(rendered["registry"], "Deployment", name)["containers"][0]["image"]
        assert image == "registry.local:5000/openpolicyagent/gatekeeper:v3.5.2"


def test_crds_keep_upstreams_versions_and_status_subresources(rendered: dict[str, Objects]) -> None:
    crd = find(rendered["default"], "CustomResourceDefinition", "constrainttemplates.templates.gatekeeper.sh")
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == ("templates.gatekeeper.sh", "Cluster",
                                                                      "ConstraintTemplate")
    assert [(v["name"], v["storage"], "subresources" in v) for v in spec["versions"]] == [
        ("v1alpha1", False, True), ("v1beta1", True, True)]
    assert crd["metadata"]["labels"] == {"gatekeeper.sh/system": "yes"}
    config = find(rendered["default"], "CustomResourceDefinition", "configs.config.gatekeeper.sh")["spec"]
    assert "subresources" not in config["versions"][0]
    assert config["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] is True
