"""The metrics_server module (role metrics-server) through the engine on the simulated cluster: an old Helm
release is removed first, readiness is the APIService Available as the API server itself reports it (the sim
runs the real metrics-server binary, see hack/simcluster.py), a server the API server cannot reach ends in a
failed phase that quotes its reason, uninstall removes the APIService before anything else (API discovery keeps
working), and re-enabling installs it again."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from installer_state import cc_with
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from simcluster import SimCluster, pid_alive

from installer.config.validate import validate
from installer.manifests import Manifests
from installer.settings import MODULE_LABEL

from .conftest import Installer, playbooks_changed

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
REPO = Path(__file__).resolve().parents[2]
NS = "kube-system"
APISERVICE = "v1beta1.metrics.k8s.io"
RELEASE = "metrics-server"
OBJECTS = {
    f"ServiceAccount/{NS}/metrics-server", "ClusterRole//system:aggregated-metrics-reader",
    "ClusterRole//system:metrics-server", f"RoleBinding/{NS}/metrics-server-auth-reader",
    "ClusterRoleBinding//metrics-server:system:auth-delegator", "ClusterRoleBinding//system:metrics-server",
    f"Service/{NS}/metrics-server", f"Deployment/{NS}/metrics-server", f"APIService//{APISERVICE}",
}
ON: dict[str, Any] = {"metrics_server": {"enabled": True}}
OFF: dict[str, Any] = {"metrics_server": {"enabled": False}}


def apiservice(api: client.ApiClient) -> dict[str, Any] | None:
    try:
        return client.ApiregistrationV1Api(api).read_api_service(APISERVICE).to_dict()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def available(api: client.ApiClient) -> dict[str, Any]:
    """The APIService's Available condition (as the API server's availability controller set it)."""
    found = apiservice(api)
    assert found is not None
    return next(c for c in found["status"]["conditions"] if c["type"] == "Available")


def discovery(sim: SimCluster) -> subprocess.CompletedProcess[str]:
    """``kubectl api-resources``: fails while an aggregated API is registered that does not answer."""
    return sim.kubectl("api-resources", "-o", "name", check=False, timeout=60)


def deletions(installer: Installer) -> list[str]:
    """The objects the last metrics_server run deleted, in order (from its job events)."""
    events = sorted((installer.results / "metrics_server" / "job_events").glob("*.json"),
                    key=lambda f: int(f.name.split("-", 1)[0]))
    out: list[str] = []
    for event in events:
        data = json.loads(event.read_text())
        if data.get("event") == "runner_on_ok":
            out += data["event_data"]["res"].get("deleted") or []
    return out


def helm(sim: SimCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(sim.bin_dir / "helm"), f"--kubeconfig={sim.kubeconfig}", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def old_release(sim: SimCluster, tmp_path: Path) -> None:
    """A deployed Helm release ``metrics-server`` in kube-system, as an old ks-installer left it."""
    chart = tmp_path / "old-chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: metrics-server\nversion: 2.11.1\nappVersion: 0.3.7\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old-metrics-server-chart}\ndata: {a: b}\n")
    proc = helm(sim, "install", RELEASE, str(chart), "--namespace", NS)
    assert proc.returncode == 0, proc.stderr


def _clean(api: client.ApiClient, sim: SimCluster) -> None:
    """Remove what an earlier, interrupted run may have left: the module's objects (the APIService first) and
    the test's Helm release."""
    kinds = yaml.safe_load((REPO / "roles" / "metrics-server" / "defaults" / "main.yaml").read_text())[
        "ks_metrics_server_kinds"]
    Manifests(api, "metrics_server").delete([], kinds=kinds, timeout=60)
    if (sim.bin_dir / "helm").exists():
        helm(sim, "uninstall", RELEASE, "--namespace", NS)


@pytest.fixture
def metrics(installer: Installer, sim_cluster: SimCluster) -> Iterator[Installer]:
    if not any(pid_alive(r["pid"], r["argv0"]) for r in sim_cluster.records()
               if r["name"].startswith("metrics-server-")):
        pytest.skip("the simulated cluster runs no metrics-server (needs CAP_NET_ADMIN for the node addresses "
                    "and `hack/build-tools.sh metrics-server`)")
    _clean(installer.api, sim_cluster)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    installer.env["PATH"] = f"{sim_cluster.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    yield installer
    _clean(installer.api, sim_cluster)


def objects(installer: Installer) -> set[str]:
    """The module's labelled objects (module_objects lists no APIServices: that one is looked up here)."""
    found = set(installer.module_objects().get("metrics_server", {}))
    live = apiservice(installer.api)
    if live is not None and (live["metadata"]["labels"] or {}).get(MODULE_LABEL) == "metrics_server":
        found.add(f"APIService//{APISERVICE}")
    return found


def test_metrics_server_install_fail_uninstall_and_reenable(metrics: Installer, sim_cluster: SimCluster,
                                                            tmp_path: Path) -> None:
    api = metrics.api
    has_helm = (sim_cluster.bin_dir / "helm").exists()
    if has_helm:
        old_release(sim_cluster, tmp_path)

    # A server the API server cannot reach (its port moved away from the Service's endpoint): the wait ends in a
    # failed phase naming the APIService, with the reason the API server gives.
    metrics.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path, "metrics_server", vars={
        "ks_metrics_server_wait_timeout": 12, "ks_metrics_server_port": 4999}))
    metrics.apply_cc(**ON)
    assert metrics.reconcile().returncode != 0
    del metrics.env["KS_PLAYBOOKS_DIR"]
    module = metrics.status()["modules"]["metrics_server"]
    assert module["phase"] == "Failed", module
    assert f"APIService/{APISERVICE} (" in module["message"], module
    condition = available(api)
    assert condition["status"] == "False"
    assert f"{condition['reason']}: {condition['message']}" in module["message"], module
    assert metrics.status()["metricsServer"] == {"status": "failed", "message": module["message"]}
    if has_helm:  # the pre-step ran first: the old release and what it installed are gone
        assert helm(sim_cluster, "list", "--namespace", NS, "-q").stdout.split() == []
        with pytest.raises(ApiException):
            client.CoreV1Api(api).read_namespaced_config_map("old-metrics-server-chart", NS)

    # The real server behind the endpoint: Available, as the API server finds it.
    assert "metrics_server" in metrics.reconcile_ok()
    assert objects(metrics) == OBJECTS
    assert available(api)["status"] == "True"
    deployment = client.AppsV1Api(api).read_namespaced_deployment("metrics-server", NS)
    assert deployment.status.available_replicas == 1
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert "metrics.k8s.io" in groups
    resources = api.call_api("/apis/metrics.k8s.io/v1beta1", "GET", response_type=object, _return_http_data_only=True)
    assert {r["name"] for r in resources["resources"]} >= {"nodes", "pods"}
    assert discovery(sim_cluster).returncode == 0
    status = metrics.status()
    assert status["metricsServer"]["status"] == "enabled" and status["metricsServer"]["enabledTime"]
    assert "message" not in status["metricsServer"]

    # A scheduling change of its own re-runs metrics_server alone (once the spec schema has the per-module keys
    # upstream read: metrics_server.nodeSelector/tolerations/affinity).
    linux = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if not validate(cc_with(metrics_server={"enabled": True, "nodeSelector": linux})["spec"]):
        metrics.apply_cc(metrics_server={"enabled": True, "nodeSelector": linux})
        assert metrics.reconcile_ok() == ["metrics_server"]
        deployment = client.AppsV1Api(api).read_namespaced_deployment("metrics-server", NS)
        assert deployment.spec.template.spec.node_selector == linux
        assert available(api)["status"] == "True"

    # Uninstall: the APIService goes first and discovery keeps working; every object goes, status is cleared.
    metrics.apply_cc(**OFF)
    assert "metrics_server" in metrics.reconcile_ok()
    assert objects(metrics) == set()
    assert apiservice(api) is None
    assert "metrics.k8s.io" not in {g.name for g in client.ApisApi(api).get_api_versions().groups}
    proc = discovery(sim_cluster)
    assert proc.returncode == 0, proc.stderr
    deleted = deletions(metrics)
    assert deleted[0] == f"APIService/{APISERVICE}", deleted
    assert set(deleted) == {o.replace("//", "/") for o in OBJECTS}, deleted
    status = metrics.status()
    assert "metricsServer" not in status and status["modules"]["metrics_server"]["phase"] == "Uninstalled"

    # Re-enable: back, and Available again.
    metrics.apply_cc(**ON)
    assert "metrics_server" in metrics.reconcile_ok()
    assert objects(metrics) == OBJECTS
    assert available(api)["status"] == "True"
    assert metrics.status()["metricsServer"]["status"] == "enabled"
