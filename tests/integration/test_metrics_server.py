"""The metrics_server module (role metrics-server) through the engine on the simulated cluster: readiness is the
APIService Available as the API server itself reports it (the sim runs the real metrics-server binary, see
hack/simcluster.py), a server the API server cannot reach ends in a failed phase that quotes its reason, uninstall
removes the APIService before anything else (API discovery keeps working), and re-enabling installs it again. An
old Helm release ``metrics-server`` is taken over in place (installer.engine.adoption): same objects, no rollout, the
release retired."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_objects import sweep_cluster_scoped
from installer_state import cc_with
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from simcluster import SimCluster, pid_alive, tool_path
from v341_cluster import Builder

from installer.config.validate import validate
from installer.objects.field_takeover import HELM_LABEL, LEGACY_MANAGERS
from installer.objects.manifests import Manifests
from installer.settings import FIELD_MANAGER, MODULE_LABEL

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
    """The real helm CLI (its own cache and config under the sim's state directory)."""
    home = str(sim.state_dir / "helm")
    env = {**os.environ, "HELM_CACHE_HOME": home, "HELM_CONFIG_HOME": home, "HELM_DATA_HOME": home}
    return subprocess.run([str(tool_path("helm")), f"--kubeconfig={sim.kubeconfig}", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _clean(api: client.ApiClient, sim: SimCluster) -> None:
    """Remove what an earlier, interrupted run may have left: the module's objects (the APIService first) and
    the test's Helm release."""
    Manifests(api, "metrics_server").uninstall(None, timeout=60)
    # Without a record the uninstall deletes the APIService (its Service goes) but leaves the other cluster-scoped
    # objects (its ClusterRoles, which the test's Helm release would then find); the test's own cleanup deletes them.
    sweep_cluster_scoped(api, "metrics_server")
    if helm(sim, "status", RELEASE, "--namespace", NS).returncode == 0:
        assert helm(sim, "uninstall", RELEASE, "--namespace", NS, "--wait").returncode == 0


@pytest.fixture
def metrics(installer: Installer, sim_cluster: SimCluster) -> Iterator[Installer]:
    if not any(pid_alive(r["pid"], r["argv0"]) for r in sim_cluster.records()
               if r["name"].startswith("metrics-server-")):
        pytest.skip("the simulated cluster runs no metrics-server (needs CAP_NET_ADMIN for the node addresses "
                    "and `hack/build-tools.sh metrics-server`)")
    _clean(installer.api, sim_cluster)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
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


def releases(sim: SimCluster) -> list[str]:
    """``namespace/name`` of every release ``helm list -A`` shows."""
    proc = helm(sim, "list", "-A", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return sorted(f"{r['namespace']}/{r['name']}" for r in json.loads(proc.stdout))


def live_objects(api: client.ApiClient, made: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``Kind/ns/name`` → the live object of each of ``made``."""
    dyn = DynamicClient(api)
    return {f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}":
            dyn.resources.get(api_version=o["apiVersion"], kind=o["kind"]).get(
                name=o["metadata"]["name"], namespace=o["metadata"].get("namespace")).to_dict() for o in made}


def replica_sets(api: client.ApiClient, uid: str, timeout: float = 60) -> list[str]:
    """The names of the Deployment's ReplicaSets once its controller made them (a rollout adds one)."""
    deadline = time.monotonic() + timeout
    while True:
        names = sorted(r.metadata.name for r in client.AppsV1Api(api).list_namespaced_replica_set(NS).items
                       if any(o.uid == uid for o in r.metadata.owner_references or []))
        if names or time.monotonic() > deadline:
            return names
        time.sleep(0.5)


def test_an_old_helm_release_is_taken_over_in_place(metrics: Installer, sim_cluster: SimCluster,
                                                    tmp_path: Path) -> None:
    """A Helm release ``metrics-server`` holding the objects the module makes: the first install applies over them
    (same objects, the module's label and field manager, Helm's marks gone, no new ReplicaSet) and then retires the
    release (its record Secrets deleted: ``helm list`` no longer shows it, ``helm uninstall`` can no longer delete
    them)."""
    api = metrics.api
    builder = Builder(metrics, sim_cluster, tmp_path / "old")
    made = builder.rendered(metrics.apply_cc(**ON))["metrics_server"]
    # The pod template as upstream v3.4.1's manifest wrote it: `affinity: {}` (kept by the API server, so part of
    # the template's hash: a render without it would roll the pods) and `tolerations: []` (dropped).
    pod = next(o for o in made if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    pod.update(affinity={}, tolerations=[])
    builder.helm_install(RELEASE, NS, made)
    assert f"{NS}/{RELEASE}" in releases(sim_cluster)
    before = live_objects(api, made)
    assert set(before) == OBJECTS
    deployment = before[f"Deployment/{NS}/metrics-server"]["metadata"]["uid"]
    assert before[f"Deployment/{NS}/metrics-server"]["spec"]["template"]["spec"]["affinity"] == {}
    rollouts = replica_sets(api, deployment)
    assert rollouts

    proc = metrics.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert metrics.ran(proc) == ["metrics_server"]
    assert objects(metrics) == OBJECTS
    assert available(api)["status"] == "True"
    after = live_objects(api, made)
    for key, obj in after.items():
        meta = obj["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        managers = {e["manager"] for e in meta.get("managedFields") or []}
        assert meta["uid"] == before[key]["metadata"]["uid"], key
        assert labels.get(MODULE_LABEL) == "metrics_server", (key, labels)
        assert labels.get(HELM_LABEL[0]) != HELM_LABEL[1], (key, labels)
        assert not [a for a in annotations if a.startswith("meta.helm.sh/")], (key, annotations)
        assert FIELD_MANAGER in managers and not managers & LEGACY_MANAGERS, (key, managers)
    assert replica_sets(api, deployment) == rollouts  # no pod recreated

    # The release retired: no record Secret left, the log says so.
    assert f"{NS}/{RELEASE}" not in releases(sim_cluster)
    records = client.CoreV1Api(api).list_namespaced_secret(NS, label_selector=f"owner=helm,name={RELEASE}").items
    assert records == []
    assert f"Retired Helm release {NS}/{RELEASE}: its objects now belong to module metrics_server" in proc.stderr
