"""The network role's manifests (weave-scope), rendered by Ansible for spec variants (no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from installer_state import upstream_objects
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
NS = "weave"
ON = {"network": {"topology": {"type": "weave-scope"}}}
ZONE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": ON,
    "global_scheduling": {**ON, "nodeSelector": {"pool": "infra"}, "tolerations": [{"operator": "Exists"}],
                          "affinity": ZONE},
    "registry": {**ON, "local_registry": "registry.local:5000"},
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: apply_defaults(changes) for name, changes in SCENARIOS.items()}
    return render_scenarios("network", "ks_network_objects", scenarios, tmp_path_factory.mktemp("network"))


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)), name
        assert keys(objects) == upstream_objects("network"), name
    labels = find(rendered["default"], "Namespace", NS)["metadata"]["labels"]
    assert labels == {"kubesphere.io/workspace": "system-workspace", "kubesphere.io/namespace": NS}


def test_workloads_as_upstream(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    (app,) = pod(objects, "Deployment", "weave-scope-app")["containers"]
    assert app["image"] == "weaveworks/scope:1.13.0"
    assert app["args"] == ["--mode=app", "--weave=false"] and app["ports"][0]["containerPort"] == 4040
    service = find(objects, "Service", "weave-scope-app")["spec"]
    assert service["ports"][0]["port"] == 80 and service["ports"][0]["targetPort"] == 4040
    assert service["selector"] == find(objects, "Deployment", "weave-scope-app")["spec"]["selector"]["matchLabels"]
    cluster_agent = pod(objects, "Deployment", "weave-scope-cluster-agent")
    assert cluster_agent["serviceAccountName"] == "weave-scope"
    assert cluster_agent["containers"][0]["args"][-1] == "weave-scope-app.weave:80"
    assert "--probe.http.listen=:4041" in cluster_agent["containers"][0]["args"]
    agent = pod(objects, "DaemonSet", "weave-scope-agent")
    assert agent["hostNetwork"] and agent["hostPID"] and agent["containers"][0]["securityContext"]["privileged"]
    assert {v["hostPath"]["path"] for v in agent["volumes"]} == {
        "/var/run/scope/plugins", "/sys/kernel/debug", "/var/run/docker.sock"}
    assert all(m["readOnly"] for m in agent["containers"][0]["volumeMounts"])
    rules = find(objects, "ClusterRole", "weave-scope")["rules"]
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]} in rules


def test_global_scheduling_and_registry(rendered: dict[str, Objects]) -> None:
    for name in ("weave-scope-app", "weave-scope-cluster-agent"):
        assert "nodeSelector" not in pod(rendered["default"], "Deployment", name)
        spec = pod(rendered["global_scheduling"], "Deployment", name)
        assert spec["nodeSelector"] == {"pool": "infra"} and spec["affinity"] == ZONE
        assert spec["tolerations"] == [{"operator": "Exists"}]
    # The per-host agent must run everywhere: it keeps upstream's tolerations and takes no node selector.
    agent = pod(rendered["global_scheduling"], "DaemonSet", "weave-scope-agent")
    assert "nodeSelector" not in agent and len(agent["tolerations"]) == 2
    images = {c["image"] for o in rendered["registry"] if o["kind"] in ("Deployment", "DaemonSet")
              for c in o["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.local:5000/weaveworks/scope:1.13.0"}
