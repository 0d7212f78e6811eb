"""What the installer applied, as the cluster shows it: every object carrying the module label."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.objects.manifests import Manifests
from installer.objects.refs import applied_by_installer
from installer.settings import MODULE_LABEL

T = TypeVar("T")

KINDS = (
    ("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("v1", "ServiceAccount"),
    ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"), ("apps/v1", "StatefulSet"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("monitoring.coreos.com/v1", "Prometheus"), ("monitoring.coreos.com/v1", "Alertmanager"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
)


def labelled_objects(api: client.ApiClient) -> dict[str, dict[str, str]]:
    """``{module: {"Kind/namespace/name": resourceVersion}}`` for every labelled object of the common kinds."""
    dyn = DynamicClient(api)
    out: dict[str, dict[str, str]] = {}
    for api_version, kind in KINDS:
        try:
            items = dyn.resources.get(api_version=api_version, kind=kind).get(label_selector=MODULE_LABEL).items
        except (ResourceNotFoundError, NotFoundError):  # CRDs not installed yet, or just deleted
            continue
        for item in items:
            meta = item.metadata
            key = f"{kind}/{meta.namespace or ''}/{meta.name}"
            out.setdefault(meta.labels[MODULE_LABEL], {})[key] = meta.resourceVersion
    return out


def applied_objects(api: client.ApiClient) -> dict[str, set[str]]:
    """``{module: {"Kind/namespace/name"}}`` of every object the installer applied with a module label, of every
    kind the API server serves (discovered, not a fixed list: a kind a role renders and its uninstall forgets
    shows here)."""
    dyn = DynamicClient(api)
    dyn.resources.invalidate_cache()
    owned: dict[str, set[str]] = {}
    for res in dyn.resources.search():
        if not res.preferred or "list" not in (res.verbs or []) or "/" in (res.name or "") \
                or res.kind.endswith("List"):
            continue
        try:
            items = res.get(label_selector=MODULE_LABEL).items
        except ApiException:
            continue
        for item in items:
            if applied_by_installer(item):
                meta = item.metadata
                owned.setdefault(meta.labels[MODULE_LABEL], set()).add(f"{res.kind}/{meta.namespace or ''}/{meta.name}")
    return owned


def delete_quietly(*calls: Callable[[], object]) -> None:
    """Run each delete call, ignoring API errors (already gone, or never created)."""
    for call in calls:
        with contextlib.suppress(ApiException):
            call()


def delete_namespace(api: client.ApiClient, *names: str, timeout: float = 120) -> None:
    """Delete the namespaces ``names`` (as a user would by hand), all at once, and wait until they are gone."""
    core = client.CoreV1Api(api)
    for name in names:
        with contextlib.suppress(ApiException):
            core.delete_namespace(name)
    deadline = time.monotonic() + timeout
    left = list(names)
    while left and time.monotonic() < deadline:
        left = [name for name in left if core.list_namespace(field_selector=f"metadata.name={name}").items]
        if left:
            time.sleep(0.5)
    if left:
        raise AssertionError(f"namespaces {', '.join(left)} still present after {timeout}s")


def delete_webhooks(api: client.ApiClient, module: str) -> None:
    """Delete ``module``'s admission webhook configurations: on the simulated cluster nothing serves them, so one
    left registered (Istio's injector matches pods everywhere) would refuse the pods of every later test."""
    admission = client.AdmissionregistrationV1Api(api)
    selector = f"{MODULE_LABEL}={module}"
    for webhook in admission.list_mutating_webhook_configuration(label_selector=selector).items:
        with contextlib.suppress(ApiException):
            admission.delete_mutating_webhook_configuration(webhook.metadata.name)
    for webhook in admission.list_validating_webhook_configuration(label_selector=selector).items:
        with contextlib.suppress(ApiException):
            admission.delete_validating_webhook_configuration(webhook.metadata.name)


def eventually(probe: Callable[[], T], timeout: float = 60, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


#: Cluster-scoped kinds a test's own cleanup never deletes (kept by every uninstall, or not a module's to lose).
KEPT_CLUSTER_KINDS = {"CustomResourceDefinition", "Namespace", "PersistentVolume", "Node"}


def sweep_cluster_scoped(api: client.ApiClient, *modules: str) -> list[str]:
    """A test's cleanup, not the installer's: delete the cluster-scoped objects the installer wrote that carry one
    of ``modules``' labels (an uninstall without the module's record leaves them: a label is no proof of whose an
    object is), found as an install finds labelled objects (Manifests.labelled), and wait until they are gone; what
    it deleted (``Kind/name``)."""
    labelled = Manifests(api, "").labelled()
    deleted: list[str] = []
    for module in modules:
        refs = [ref for ref in labelled.get(module, []) if not ref[2] and ref[1] not in KEPT_CLUSTER_KINDS]
        objects = [{"apiVersion": v, "kind": k, "metadata": {"name": n}} for v, k, _, n in refs]
        deleted += Manifests(api, module).delete_refs(objects, timeout=120).deleted
    return deleted
