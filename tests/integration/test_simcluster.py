"""The simulated cluster is a real one: API semantics, controllers, kwok nodes, and a clean shutdown."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import k8s_versions as kv
import pytest
from cluster_objects import eventually
from kubernetes import client, config
from simcluster import (
    JOB_SECONDS,
    KWOK_NODE_ANNOTATION,
    KWOK_STAGES,
    METRICS_SERVER_PORT,
    NODES,
    SERVICE_CIDR,
    STORAGE_CLASS,
    SimCluster,
    kwok_stages,
    loopback_addresses,
    pid_alive,
    port_open,
    stays_on_machine,
)

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]



def test_custom_object_spec_and_status_subresource(widgets: Any, namespace: str) -> None:
    created = widgets.create(namespace, "w1", {"size": 1, "color": "red"})
    assert created["metadata"]["generation"] == 1
    assert created["spec"] == {"size": 1, "color": "red"}
    assert "status" not in created

    patched = widgets.patch_spec(namespace, "w1", {"size": 2})
    assert patched["spec"] == {"size": 2, "color": "red"}
    assert patched["metadata"]["generation"] == 2

    with_status = widgets.patch_status(namespace, "w1", {"phase": "Ready", "observedGeneration": 2})
    assert with_status["status"] == {"phase": "Ready", "observedGeneration": 2}
    assert with_status["spec"] == {"size": 2, "color": "red"}
    assert with_status["metadata"]["generation"] == 2  # status writes do not bump the generation

    # with a status subresource, status sent to the main resource is ignored, and spec sent to /status too
    custom = client.CustomObjectsApi(widgets.api)
    args = (widgets.group, widgets.version, namespace, widgets.plural, "w1")
    custom.patch_namespaced_custom_object(*args, {"spec": {"size": 3}, "status": {"phase": "Ignored"}})
    custom.patch_namespaced_custom_object_status(*args, {"spec": {"size": 99}, "status": {"phase": "Done"}})
    live = widgets.get(namespace, "w1")
    assert live["spec"]["size"] == 3
    assert live["status"] == {"phase": "Done", "observedGeneration": 2}
    assert live["metadata"]["generation"] == 3


def test_nodes_are_kwok_nodes_and_ready(sim_cluster: SimCluster, kube_api: client.ApiClient) -> None:
    nodes = {n.metadata.name: n for n in client.CoreV1Api(kube_api).list_node().items}
    assert set(nodes) >= {name for name, _, _ in NODES}
    assert [name for name, _, _ in sim_cluster.nodes] == [name for name, _, _ in NODES]
    for name, ip, control_plane in sim_cluster.nodes:
        node = nodes[name]
        assert node.metadata.annotations[KWOK_NODE_ANNOTATION[0]] == KWOK_NODE_ANNOTATION[1]
        assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
        assert {a.type: a.address for a in node.status.addresses}["InternalIP"] == ip
        assert ("node-role.kubernetes.io/control-plane" in node.metadata.labels) is control_plane
        assert not node.spec.taints
    sc = client.StorageV1Api(kube_api).read_storage_class(STORAGE_CLASS)
    assert sc.metadata.annotations["storageclass.kubernetes.io/is-default-class"] == "true"


def test_control_plane_and_kubelets_report_the_clusters_version(sim_cluster: SimCluster,
                                                                kube_api: client.ApiClient) -> None:
    """The version chosen for the cluster (``--kubernetes``, ``KS_KUBERNETES_VERSION``, else the pinned one) is
    the one its API server answers with, its nodes report and its control plane's binaries carry."""
    version = sim_cluster.kubernetes
    assert version == kv.cluster_version(kv.pinned_versions())
    assert client.VersionApi(kube_api).get_code().git_version == version
    assert {n.status.node_info.kubelet_version for n in client.CoreV1Api(kube_api).list_node().items} == {version}
    binaries = {r["name"]: Path(r["argv0"]).name for r in sim_cluster.records()}
    assert {name: binaries[name] for name in kv.CONTROL_PLANE} == {name: f"{name}-{version}"
                                                                  for name in kv.CONTROL_PLANE}


def test_deployment_becomes_available_on_kwok_node(sim_cluster: SimCluster, kube_api: client.ApiClient,
                                                   namespace: str) -> None:
    labels = {"app": "web"}
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    apps.create_namespaced_deployment(namespace, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2, selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx:1.27")])))))

    dep = eventually(lambda: (d := apps.read_namespaced_deployment_status("web", namespace)).status.available_replicas
                     == 2 and d, what="2 available replicas")
    assert {c.type: c.status for c in dep.status.conditions}["Available"] == "True"

    kwok_nodes = {n.metadata.name for n in core.list_node().items
                  if (n.metadata.annotations or {}).get(KWOK_NODE_ANNOTATION[0]) == KWOK_NODE_ANNOTATION[1]}
    pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
    assert len(pods) == 2
    for pod in pods:
        assert pod.spec.node_name in kwok_nodes
        assert pod.status.phase == "Running"
        assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(sim_cluster.pod_cidr)
        assert pod.status.container_statuses[0].ready


def test_controllers_tokens_volumes_and_jobs(sim_cluster: SimCluster, kube_api: client.ApiClient,
                                             namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    # service-account controller, root CA publisher, and the token controller (legacy token Secrets)
    eventually(lambda: core.list_namespaced_service_account(namespace, field_selector="metadata.name=default").items,
               what="default ServiceAccount")
    eventually(lambda: core.list_namespaced_config_map(namespace, field_selector="metadata.name=kube-root-ca.crt")
               .items, what="kube-root-ca.crt")
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="tok", annotations={"kubernetes.io/service-account.name": "default"}),
        type="kubernetes.io/service-account-token"))
    secret = eventually(lambda: (s := core.read_namespaced_secret("tok", namespace)).data
                        and "token" in s.data and s, what="token in the Secret")
    assert set(secret.data) >= {"token", "ca.crt", "namespace"}

    # the default StorageClass provisions through kwok and the PV controller binds
    core.create_namespaced_persistent_volume_claim(namespace, client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="data"),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    pvc = eventually(lambda: (p := core.read_namespaced_persistent_volume_claim("data", namespace)).status.phase
                     == "Bound" and p, what="PVC Bound")
    assert pvc.spec.storage_class_name == STORAGE_CLASS

    # a Job's pod completes
    sim_cluster.kubectl("-n", namespace, "create", "job", "once", "--image=busybox", "--", "true")
    eventually(lambda: json.loads(sim_cluster.kubectl("-n", namespace, "get", "job", "once", "-o", "json").stdout)
               ["status"].get("succeeded") == 1, what="Job succeeded")


def test_kubectl_helper_and_kubeconfig_env(sim_cluster: SimCluster) -> None:
    assert os.environ["KUBECONFIG"] == str(sim_cluster.kubeconfig)
    out = sim_cluster.kubectl("get", "nodes", "-o", "name").stdout.split()
    assert sorted(out) == sorted(f"node/{name}" for name, _, _ in NODES)
    version = json.loads(sim_cluster.kubectl("version", "-o", "json").stdout)
    # kubectl keeps its pin whatever the control plane's version
    assert version["clientVersion"]["gitVersion"] == kv.pinned_versions()["KUBERNETES_VERSION"]
    assert version["serverVersion"]["gitVersion"] == sim_cluster.kubernetes


def _assert_gone(records: list[dict[str, Any]], ports: dict[str, int]) -> None:
    assert records, "no processes were recorded"
    alive = [r for r in records if pid_alive(r["pid"])]
    assert not alive, f"left running: {alive}"
    assert not [p for p in ports.values() if port_open(p)], f"ports still open: {ports}"


def metrics_servers(cluster: SimCluster) -> list[dict[str, Any]]:
    return [r for r in cluster.records() if r["name"].startswith("metrics-server-")]


def test_second_cluster_stops_without_leftovers(sim_cluster: SimCluster, tmp_path: Path) -> None:
    with SimCluster(tmp_path / "second", die_with_parent=True, quiet=True) as second:
        records, ports = second.records(), dict(second.ports)
        names = {r["name"] for r in records}
        assert names - {r["name"] for r in metrics_servers(second)} == {
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "sim-webhooks"}
        assert all(pid_alive(r["pid"], r["argv0"]) for r in records)
        assert port_open(ports["apiserver"])
        addresses = list(second.addresses)
        # node addresses on the loopback: its own block, a metrics-server listening on each; its own pod range
        assert addresses == [ip for _, ip, _ in second.nodes]
        assert set(addresses) <= loopback_addresses()
        assert not set(addresses) & set(sim_cluster.addresses), "two clusters share node addresses"
        assert second.pod_cidr != sim_cluster.pod_cidr
        pod_ip = _nth_host(second.pod_cidr, 5)
        assert _apiserver_route(second, pod_ip).startswith("local "), "the pod range is not local while it runs"
        assert len(metrics_servers(second)) == len(second.nodes)
        for ip in addresses:
            eventually(lambda ip=ip: port_open(METRICS_SERVER_PORT, ip), 30, f"metrics-server on {ip}")
    _assert_gone(records, ports)
    assert not set(addresses) & loopback_addresses(), "node addresses left on the loopback"
    assert not _route(pod_ip).startswith("local "), "the pod range stayed local after the cluster stopped"
    assert stays_on_machine(pod_ip), "after the cluster stopped its pod range leaves the machine"
    assert not second.state_dir.exists()


def _nth_host(cidr: str, n: int) -> str:
    return str(ipaddress.ip_network(cidr)[n])


def _route(ip: str) -> str:
    proc = subprocess.run(["ip", "route", "get", ip], capture_output=True, text=True, timeout=10, check=False)
    return (proc.stdout + proc.stderr).strip()


def _apiserver_route(cluster: SimCluster, ip: str) -> str:
    """``ip route get`` of ``ip`` in kube-apiserver's network namespace (what its dials use)."""
    pid = next(r["pid"] for r in cluster.records() if r["name"] == "kube-apiserver")
    proc = subprocess.run(["nsenter", "-t", str(pid), "-n", "ip", "route", "get", ip], capture_output=True,
                          text=True, timeout=10, check=False)
    return (proc.stdout + proc.stderr).strip()


def test_pod_service_and_node_addresses_never_leave_the_machine(sim_cluster: SimCluster,
                                                               kube_api: client.ApiClient) -> None:
    """Seen from kube-apiserver's process: this cluster's pod IPs and node IPs are local, and its Service IPs,
    other clusters' pod ranges and unclaimed node addresses are refused on the machine; none goes via a gateway."""
    pod_ips = [_nth_host(sim_cluster.pod_cidr, 2), _nth_host(sim_cluster.pod_cidr, 1000)]
    node_ips = [ip for _, ip, _ in sim_cluster.nodes]
    for ip in pod_ips + node_ips:
        route = _apiserver_route(sim_cluster, ip)
        assert route.startswith("local "), f"{ip}: {route}"
    service_ips = [_nth_host(SERVICE_CIDR, 1), _nth_host(SERVICE_CIDR, 200),
                   *(str(s.spec.cluster_ip) for s in client.CoreV1Api(kube_api).list_service_for_all_namespaces().items
                     if s.spec.cluster_ip not in (None, "None"))]
    elsewhere = ["10.244.255.7", "172.31.250.9", "10.0.77.1"]
    for ip in service_ips + elsewhere:
        route = _apiserver_route(sim_cluster, ip)
        assert " via " not in route and " dev eth" not in route, f"{ip} leaves the machine: {route}"
        assert stays_on_machine(ip), f"{ip}: {route}"


def test_cli_up_and_down_from_other_processes(tmp_path: Path) -> None:
    state = tmp_path / "cli"
    env = {**os.environ, "KS_SIM_DIR": str(state)}
    cli = [sys.executable, str(REPO / "hack" / "simcluster.py")]
    try:
        up = subprocess.run([*cli, "up"], env=env, capture_output=True, text=True, timeout=180, check=False)
        assert up.returncode == 0, up.stderr
        assert f"export KUBECONFIG={state / 'kubeconfig'}" in up.stdout
        assert "simulated cluster up in" in up.stderr
        records = json.loads((state / "pids.json").read_text())
        ports = json.loads((state / "cluster.json").read_text())["ports"]
        addresses = json.loads((state / "cluster.json").read_text())["addresses"]
        again = subprocess.run([*cli, "up"], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert again.returncode == 1 and "already runs" in again.stderr, again.stderr  # and changes nothing
        assert json.loads((state / "pids.json").read_text()) == records
        status = subprocess.run([*cli, "status"], env=env, capture_output=True, text=True, timeout=30, check=False)
        assert status.returncode == 0, status.stdout + status.stderr
        assert "readyz: ok" in status.stdout
    finally:
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert down.returncode == 0, down.stderr
    _assert_gone(records, ports)
    assert not set(addresses) & loopback_addresses(), "node addresses left on the loopback"
    assert not state.exists()


def _deployment(name: str, probe: client.V1Probe | None) -> client.V1Deployment:
    labels = {"app": name}
    container = client.V1Container(name=name, image="busybox:1.31.1", readiness_probe=probe)
    return client.V1Deployment(metadata=client.V1ObjectMeta(name=name), spec=client.V1DeploymentSpec(
        replicas=1, selector=client.V1LabelSelector(match_labels=labels),
        template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=labels),
                                          spec=client.V1PodSpec(containers=[container]))))


def test_latency_model_probes_is_opt_in_and_follows_the_manifests(sim_cluster: SimCluster, tmp_path: Path) -> None:
    """Off by default (the stage set is the fast one, byte for byte); with ``latency="probes"`` a Deployment whose
    container's readinessProbe waits 5 s becomes Available after about 5 s, one without a probe at once, and a
    Job completes JOB_SECONDS after its pod started."""
    assert kwok_stages() is KWOK_STAGES
    if (sim_cluster.state_dir / "kwok.yaml").exists():  # not a reused cluster (KS_SIM_KUBECONFIG)
        assert (sim_cluster.state_dir / "kwok.yaml").read_text() == kv.kwok_stages_for(KWOK_STAGES,
                                                                                      sim_cluster.kubernetes)
    with SimCluster(tmp_path / "latency", die_with_parent=True, quiet=True, latency="probes") as cluster:
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        apps = client.AppsV1Api(api)
        probe = client.V1Probe(tcp_socket=client.V1TCPSocketAction(port=8080), initial_delay_seconds=5)
        start = time.monotonic()
        apps.create_namespaced_deployment("default", _deployment("slow", probe))
        apps.create_namespaced_deployment("default", _deployment("quick", None))
        cluster.kubectl("create", "job", "once", "--image=busybox:1.31.1", "--", "true")
        ready: dict[str, float] = {}
        while len(ready) < 3 and time.monotonic() - start < 30:
            for name in {"slow", "quick"} - ready.keys():
                if apps.read_namespaced_deployment_status(name, "default").status.available_replicas == 1:
                    ready[name] = time.monotonic() - start
            if "job" not in ready and client.BatchV1Api(api).read_namespaced_job_status(
                    "once", "default").status.succeeded == 1:
                ready["job"] = time.monotonic() - start
            time.sleep(0.1)
        assert ready.keys() == {"slow", "quick", "job"}, ready
        # the delays count from the pod's creationTimestamp, which has whole seconds: up to 1 s early
        assert ready["quick"] < 3, ready
        assert 4 <= ready["slow"] < 12, ready
        assert JOB_SECONDS - 1 <= ready["job"] < JOB_SECONDS + 7, ready
