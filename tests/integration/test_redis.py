"""The redis module (role redis) through the engine on the simulated cluster: install, the switch to HA with a
new volume size, uninstall (the volumes and redis-secret stay) and the reinstall without HA; switching the
topology either way never runs both."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from cluster_objects import delete_quietly
from kubernetes import client, watch

from .conftest import Installer, between_cleanups

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-system"
SECRET = "redis-secret"
HA_PVCS = [f"data-redis-ha-server-{i}" for i in range(3)]
SINGLE = {f"{NS}/{n}" for n in ("ConfigMap/redis-configmap", "Deployment/redis", "Service/redis")}
HA = {f"{NS}/{n}" for n in (
    "ConfigMap/redis-ha-configmap", "Deployment/redis-ha-haproxy", "Role/redis-ha", "RoleBinding/redis-ha",
    "Service/redis", "Service/redis-ha", "Service/redis-ha-announce-0", "Service/redis-ha-announce-1",
    "Service/redis-ha-announce-2", "ServiceAccount/redis-ha", "ServiceAccount/redis-ha-haproxy",
    "StatefulSet/redis-ha-server")}
KEPT = {f"{NS}/Secret/{SECRET}"}


def _refs(names: set[str]) -> set[str]:
    """``ns/Kind/name`` → ``Kind/ns/name`` (the keys of module_objects)."""
    return {f"{kind}/{ns}/{name}" for ns, kind, name in (n.split("/") for n in names)}


def _clean(api: client.ApiClient) -> None:
    """Remove what the module leaves behind (the Secret and the volumes) and any object of an earlier run."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    calls = [lambda: apps.delete_namespaced_deployment("redis", NS),
             lambda: apps.delete_namespaced_deployment("redis-ha-haproxy", NS),
             lambda: apps.delete_namespaced_stateful_set("redis-ha-server", NS),
             lambda: core.delete_namespaced_secret(SECRET, NS)]
    calls += [lambda pvc=pvc: core.delete_namespaced_persistent_volume_claim(pvc, NS)
              for pvc in ["redis-pvc", *HA_PVCS]]
    delete_quietly(*calls)


@pytest.fixture
def redis(installer: Installer) -> Iterator[Installer]:
    yield from between_cleanups(installer, _clean)


def password(api: client.ApiClient) -> tuple[str, str]:
    """The stored password and the Secret's resourceVersion."""
    secret = client.CoreV1Api(api).read_namespaced_secret(SECRET, NS)
    return base64.b64decode(secret.data["auth"]).decode(), secret.metadata.resource_version


def pvcs(api: client.ApiClient) -> dict[str, str]:
    """The volumes in kubesphere-system that belong to redis: name → requested size."""
    items = client.CoreV1Api(api).list_namespaced_persistent_volume_claim(NS).items
    return {p.metadata.name: p.spec.resources.requests["storage"] for p in items
            if p.metadata.name == "redis-pvc" or p.metadata.name in HA_PVCS}


def test_redis_install_ha_switch_uninstall_and_reinstall(redis: Installer) -> None:
    api = redis.api
    apps = client.AppsV1Api(api)
    redis.apply_cc(common__redis={"enabled": True, "enableHA": False, "volumeSize": "2Gi"})
    assert "redis" in redis.reconcile_ok()
    assert set(redis.module_objects()["redis"]) == _refs(SINGLE | KEPT)
    assert apps.read_namespaced_deployment("redis", NS).status.available_replicas == 1
    assert pvcs(api) == {"redis-pvc": "2Gi"}
    status = redis.status()
    assert status["redis"]["status"] == "enabled" and status["redis"]["enabledTime"]
    secret, version = password(api)
    assert len(secret) == 15 and secret.isalpha()
    assert secret not in (redis.results / "redis" / "stdout").read_text()

    # HA with a new volume size: only redis re-runs; the single redis goes (its volume stays), the password stays.
    redis.apply_cc(common__redis={"enabled": True, "enableHA": True, "volumeSize": "3Gi"})
    assert redis.reconcile_ok() == ["redis"]
    assert set(redis.module_objects()["redis"]) == _refs(HA | KEPT)
    assert apps.read_namespaced_stateful_set("redis-ha-server", NS).status.ready_replicas == 3
    assert apps.read_namespaced_deployment("redis-ha-haproxy", NS).status.available_replicas == 3
    assert pvcs(api) == {"redis-pvc": "2Gi", **dict.fromkeys(HA_PVCS, "3Gi")}
    service = client.CoreV1Api(api).read_namespaced_service("redis", NS)
    assert service.spec.selector == {"app": "redis-ha-haproxy", "release": "ks-redis"}
    assert password(api) == (secret, version)

    # Uninstall: every object goes except the volumes and the password that guards their data.
    redis.apply_cc(common__redis={"enabled": False, "enableHA": True, "volumeSize": "3Gi"})
    assert "redis" in redis.reconcile_ok()
    assert set(redis.module_objects()["redis"]) == _refs(KEPT)
    assert set(pvcs(api)) == {"redis-pvc", *HA_PVCS}
    status = redis.status()
    assert "redis" not in status and status["modules"]["redis"]["phase"] == "Uninstalled"

    # Re-enable without HA: back on the kept volume, with the same password.
    redis.apply_cc(common__redis={"enabled": True, "enableHA": False, "volumeSize": "5Gi"})
    assert "redis" in redis.reconcile_ok()
    assert set(redis.module_objects()["redis"]) == _refs(SINGLE | KEPT)
    assert apps.read_namespaced_deployment("redis", NS).status.available_replicas == 1
    assert pvcs(api)["redis-pvc"] == "2Gi"  # an existing volume keeps its size
    assert redis.status()["redis"]["status"] == "enabled"
    assert password(api) == (secret, version)


SINGLE_PODS, HA_PODS = "app=redis,tier=database", "app in (redis-ha, redis-ha-haproxy)"


@contextmanager
def overlaps(api: client.ApiClient) -> Iterator[list[str]]:
    """Each moment (a pod event) at which pods of both topologies existed, watched while the block runs."""
    core = client.CoreV1Api(api)
    found: list[str] = []
    stop = threading.Event()
    selector = "app in (redis, redis-ha, redis-ha-haproxy)"
    start = core.list_namespaced_pod(NS, label_selector=selector)
    pods = {p.metadata.name: p.metadata.labels for p in start.items}

    def follow() -> None:
        version = start.metadata.resource_version
        while not stop.is_set():
            for event in watch.Watch().stream(core.list_namespaced_pod, NS, label_selector=selector,
                                              resource_version=version, timeout_seconds=1):
                pod = event["object"]
                version = pod.metadata.resource_version
                if event["type"] == "DELETED":
                    pods.pop(pod.metadata.name, None)
                else:
                    pods[pod.metadata.name] = pod.metadata.labels
                single = [n for n, labels in pods.items() if labels.get("tier") == "database"]
                ha = [n for n, labels in pods.items() if labels.get("app", "").startswith("redis-ha")]
                if single and ha:
                    found.append(f"{sorted(single)} beside {sorted(ha)}")

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        time.sleep(0.5)
        stop.set()
        thread.join(timeout=10)


def test_switching_the_topology_never_runs_both(redis: Installer) -> None:
    core = client.CoreV1Api(redis.api)
    redis.apply_cc(common__redis={"enabled": True, "enableHA": False})
    assert "redis" in redis.reconcile_ok()
    assert core.list_namespaced_pod(NS, label_selector=SINGLE_PODS).items
    for ha, pods in ((True, HA_PODS), (False, SINGLE_PODS)):
        redis.apply_cc(common__redis={"enabled": True, "enableHA": ha})
        with overlaps(redis.api) as both:
            assert redis.reconcile_ok() == ["redis"]
        assert both == []
        assert set(redis.module_objects()["redis"]) == _refs((HA if ha else SINGLE) | KEPT)
        assert core.list_namespaced_pod(NS, label_selector=pods).items  # the new topology runs
        other = SINGLE_PODS if ha else HA_PODS
        assert core.list_namespaced_pod(NS, label_selector=other).items == []


def test_a_found_secret_without_the_password_gets_one_and_the_log_names_the_keys(redis: Installer) -> None:
    """redis-secret made by hand with another key and no ``auth``: the password is generated beside what is kept,
    and the takeover's line says which key was kept and which generated, never the value."""
    note = base64.b64encode(b"made by hand").decode()
    client.CoreV1Api(redis.api).create_namespaced_secret(NS, {"metadata": {"name": SECRET}, "data": {"note": note}})
    redis.apply_cc(common__redis={"enabled": True, "enableHA": False})
    proc = redis.reconcile()
    assert proc.returncode == 0 and "redis" in redis.ran(proc), proc.stderr[-3000:]
    secret, _ = password(redis.api)
    assert client.CoreV1Api(redis.api).read_namespaced_secret(SECRET, NS).data["note"] == note
    assert (f"[redis] kept the credentials that were there: Secret/{NS}/{SECRET} (keys kept: note; generated: auth)"
            in proc.stderr), proc.stderr[-3000:]
    assert secret not in proc.stderr and "(keys )" not in proc.stderr
