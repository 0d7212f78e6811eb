"""Full removal (``python -m installer uninstall --all [--purge]``) and the purge annotation, on the simulated
cluster: what stays (PVCs, CRDs, namespaces holding PVCs) and what goes (everything else, the state, the cc)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from engine_zygote import ENGINE
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import MODULE_LABEL, NAMESPACE, PURGE_ANNOTATION, STATE_SECRET

from .conftest import Installer, between_cleanups

pytestmark = pytest.mark.cluster
MONITORING = "kubesphere-monitoring-system"
PROMETHEUS_CLAIM = "prometheus-k8s-db-prometheus-k8s-0"
REDIS_CLAIMS = [f"data-redis-ha-server-{i}" for i in range(3)]
INSTALLED = ("preinstall", "ks-core", "ks-config", "monitoring", "redis")  # what these tests install


def uninstall_all(installer: Installer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENGINE, "uninstall", "--all", *args], env=installer.environ(),
                          capture_output=True, text=True, timeout=900, check=False)


def claims(api: client.ApiClient, namespace: str) -> set[str]:
    return {c.metadata.name for c in client.CoreV1Api(api).list_namespaced_persistent_volume_claim(namespace).items}


def wait_for(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def operator_made_prometheus(api: client.ApiClient) -> None:
    """What prometheus-operator does for the Prometheus ``k8s`` (no operator runs here): a StatefulSet owned by
    the CR, whose volumeClaimTemplate the StatefulSet controller turns into a PVC without the module's label."""
    prometheus = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "monitoring.coreos.com", "v1", MONITORING, "prometheuses", "k8s")
    labels = {"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}
    body = {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "prometheus-k8s", "namespace": MONITORING, "ownerReferences": [{
                "apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus", "name": "k8s",
                "uid": prometheus["metadata"]["uid"], "controller": True}]},
            "spec": {"replicas": 1, "serviceName": "prometheus-operated", "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "prometheus", "image": "prom/prometheus:v2.39.1"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "prometheus-k8s-db"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}}]}}
    client.AppsV1Api(api).create_namespaced_stateful_set(MONITORING, body)
    wait_for(lambda: PROMETHEUS_CLAIM in claims(api, MONITORING), "the StatefulSet controller's PVC")


def labelled_crds(api: client.ApiClient) -> list[Any]:
    """The CRDs of the modules these tests install (other tests' modules may have left theirs)."""
    selector = f"{MODULE_LABEL} in ({','.join(INSTALLED)})"
    return client.ApiextensionsV1Api(api).list_custom_resource_definition(label_selector=selector).items


def has_resources(api: client.ApiClient, crd: Any) -> bool:
    version = next(v.name for v in crd.spec.versions if v.served)
    return bool(client.CustomObjectsApi(api).list_cluster_custom_object(
        crd.spec.group, version, crd.spec.names.plural).get("items"))


def _clean(api: client.ApiClient) -> None:
    """What the tests leave (kept PVCs, redis' Secret) or made by hand."""
    with contextlib.suppress(ApiException):
        client.AppsV1Api(api).delete_namespaced_stateful_set("prometheus-k8s", MONITORING)
    core = client.CoreV1Api(api)
    for name in (PROMETHEUS_CLAIM, "redis-pvc", *REDIS_CLAIMS):
        for ns in (MONITORING, NAMESPACE):
            with contextlib.suppress(ApiException):
                core.delete_namespaced_persistent_volume_claim(name, ns)
    with contextlib.suppress(ApiException):
        core.delete_namespaced_secret("redis-secret", NAMESPACE)


@pytest.fixture
def removal(installer: Installer) -> Iterator[Installer]:
    yield from between_cleanups(installer, _clean)


@pytest.mark.versions
def test_purge_annotation_then_uninstall_all_keeps_data(removal: Installer) -> None:
    installer = removal
    installer.apply_cc(common__redis={"enabled": True, "enableHA": True})
    installer.reconcile_ok()
    operator_made_prometheus(installer.api)
    wait_for(lambda: set(REDIS_CLAIMS) <= claims(installer.api, NAMESPACE), "redis-ha's PVCs")

    # purge one module: annotate, then disable
    installer.custom.patch_namespaced_custom_object(
        "installer.kubesphere.io", "v1alpha1", NAMESPACE, "clusterconfigurations", "ks-installer",
        {"metadata": {"annotations": {PURGE_ANNOTATION: "redis,nosuchmodule"}}})
    installer.apply_cc(common__redis={"enabled": False, "enableHA": True})
    planned = subprocess.run([*ENGINE, "plan", "-o", "json"], env=installer.environ(), capture_output=True,
                             text=True, check=True)  # what the reconcile below does, purge included
    assert json.loads(planned.stdout)["purge"] == ["redis"]
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert installer.ran(proc) == ["ks-config", "ks-core", "redis"]
    assert "names unknown modules, ignored: nosuchmodule" in proc.stderr
    # Deleted: gone, or going (a claim's pvc-protection holds it until the pod using it has terminated).
    core = client.CoreV1Api(installer.api)
    left = [c for c in core.list_namespaced_persistent_volume_claim(NAMESPACE).items if c.metadata.name in REDIS_CLAIMS]
    assert all(c.metadata.deletion_timestamp for c in left), [c.metadata.name for c in left]
    wait_for(lambda: not set(REDIS_CLAIMS) & claims(installer.api, NAMESPACE), "redis-ha's PVCs to go")
    with pytest.raises(ApiException):  # the password went with the data it guarded
        client.CoreV1Api(installer.api).read_namespaced_secret("redis-secret", NAMESPACE)
    assert PURGE_ANNOTATION not in (installer.cc()["metadata"].get("annotations") or {})

    # remove everything, keeping data
    crds_before = {c.metadata.name for c in labelled_crds(installer.api)}
    proc = uninstall_all(installer)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Start uninstalling ks-core" in proc.stderr and "Start uninstalling preinstall" in proc.stderr
    objects = installer.module_objects()
    left = {key for module in INSTALLED for key in objects.get(module, {})}
    assert {key.split("/")[0] for key in left} == {"Namespace", "CustomResourceDefinition"}, left
    assert [key for key in left if key.startswith("Namespace/")] == [f"Namespace//{MONITORING}"]  # holds a PVC
    assert {c.metadata.name for c in labelled_crds(installer.api)} == crds_before
    assert PROMETHEUS_CLAIM in claims(installer.api, MONITORING)  # and so its namespace stays
    core = client.CoreV1Api(installer.api)
    assert core.read_namespace(MONITORING).status.phase == "Active"
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_secret(STATE_SECRET, NAMESPACE)
    assert gone.value.status == 404
    with pytest.raises(ApiException) as gone:
        installer.cc()
    assert gone.value.status == 404
    assert core.read_namespace(NAMESPACE).status.phase == "Active"  # the installer's own namespace


@pytest.mark.versions
def test_uninstall_all_purge_removes_data_and_unused_crds(removal: Installer) -> None:
    installer = removal
    installer.apply_cc()
    installer.reconcile_ok()
    operator_made_prometheus(installer.api)
    assert labelled_crds(installer.api)
    proc = uninstall_all(installer, "--purge")
    assert proc.returncode == 0, proc.stderr[-3000:]
    left = labelled_crds(installer.api)
    # Only the CRDs whose custom resources are left (other tests' modules, on the shared cluster) stay.
    kept = {f"CustomResourceDefinition//{c.metadata.name}" for c in left}
    assert set(installer.module_objects().get("monitoring", {})) <= kept
    assert all(has_resources(installer.api, crd) for crd in left), [c.metadata.name for c in left]
    core = client.CoreV1Api(installer.api)
    wait_for(lambda: PROMETHEUS_CLAIM not in claims(installer.api, MONITORING), "the Prometheus PVC to go")
    with pytest.raises(ApiException) as gone:
        installer.cc()
    assert gone.value.status == 404
    assert core.read_namespace(NAMESPACE).status.phase == "Active"


def test_uninstall_all_without_a_cc_is_a_usage_error(removal: Installer) -> None:
    proc = uninstall_all(removal)
    assert proc.returncode == 2 and "not found: nothing to uninstall" in proc.stderr
