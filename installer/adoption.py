"""Taking over a cluster that ks-installer v3.4.1 installed.

The original applied its objects with ``kubectl apply`` (client-side: field manager ``kubectl-client-side-apply``
and the ``kubectl.kubernetes.io/last-applied-configuration`` annotation), ``kubectl create`` and Helm (manager
``helm``, label ``app.kubernetes.io/managed-by: Helm``, annotations ``meta.helm.sh/release-*`` and one release
record Secret per revision). On the first reconcile each module applies its objects over what is there:

- **Fields** (:func:`take_over`, called by :class:`installer.manifests.Manifests` and the credential writers before
  their server-side apply of an object that exists without the module's label): the fields those managers own are
  moved to the installer's ``Apply`` entry in one JSON patch of ``metadata.managedFields`` guarded by the
  object's resourceVersion (what client-go's ``csaupgrade.UpgradeManagedFields`` does). The apply that follows
  then removes the fields only they owned and the installer does not set (the last-applied annotation, Helm's
  annotations) and keeps every other value. Controllers' entries (kube-controller-manager, the operators) are
  left alone. Nothing is deleted; a workload whose pod template the apply leaves as it was is not restarted.
- **Helm releases** (:func:`retire_releases`, after the module's run succeeded): the release record Secrets of
  the releases the module took over are deleted, never their objects, so ``helm list`` no longer shows them and a
  ``helm uninstall`` can no longer delete what the module now owns.
- **Credentials**: the generated Secrets keep the values they have (installer.random_secret, installer.core_secret,
  installer.certs); :class:`Takeover` logs which ones a module found (names and key names, never values).
- **What no module makes** (:func:`leftovers`): objects in the KubeSphere namespaces that carry kubectl's
  last-applied annotation or Helm's label and no module label, and Helm releases no module takes over, are
  logged and listed in ``status.adoption``; they are never deleted.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
from collections.abc import Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.foreign import is_ours
from installer.settings import FIELD_MANAGER, MODULE_LABEL, NAMESPACE

log = logging.getLogger("installer")

#: The field managers of the original installer's writes (``kubectl apply``/``create``, Helm 3). Entries of
#: other managers (controllers, operators, users' ``kubectl edit``) keep their fields.
LEGACY_MANAGERS = frozenset({"kubectl-client-side-apply", "kubectl-create", "kubectl", "helm"})
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
HELM_LABEL = ("app.kubernetes.io/managed-by", "Helm")
JSON_PATCH = "application/json-patch+json"

#: The original's Helm releases, ``(namespace, release)`` → the module that makes their objects now (and those of
#: older installers it may have left: metrics-server's, KubeEdge's chart 0.1.0 ``kubeedge``).
RELEASES: dict[tuple[str, str], str] = {
    ("kube-system", "snapshot-controller"): "preinstall",
    ("kube-system", "metrics-server"): "metrics_server",
    ("kubesphere-system", "ks-core"): "ks-core",
    ("kubesphere-system", "ks-redis"): "redis",
    ("kubesphere-system", "ks-openldap"): "openldap",
    ("kubesphere-system", "ks-minio"): "minio",
    ("kubesphere-monitoring-system", "notification-manager"): "monitoring",
    ("kubesphere-monitoring-system", "gpu-dcgm-exporter"): "monitoring",
    ("kubesphere-logging-system", "opensearch-master"): "opensearch",
    ("kubesphere-logging-system", "opensearch-data"): "opensearch",
    ("kubesphere-logging-system", "opensearch-logging-curator"): "opensearch",
    ("kubesphere-logging-system", "opensearch-dashboard"): "opensearch",
    ("kubesphere-logging-system", "elasticsearch-logging-curator"): "opensearch",
    ("kubesphere-logging-system", "logsidecar-injector"): "logging",
    ("kubesphere-logging-system", "ks-events"): "events",
    ("kubesphere-logging-system", "kube-auditing"): "auditing",
    ("kubesphere-devops-system", "devops"): "devops",
    ("argocd", "devops"): "devops",
    ("istio-system", "jaeger-operator"): "servicemesh",
    ("istio-system", "kiali-operator"): "servicemesh",
    ("kube-federation-system", "kubefed"): "multicluster",
    ("kubeedge", "cloudcore"): "edgeruntime",
    ("kubeedge", "kubeedge"): "edgeruntime",
    ("gatekeeper-system", "gatekeeper"): "gatekeeper",
}

#: The Secrets holding credentials that each module's generators keep (the original's values stay in use).
CREDENTIALS: dict[str, tuple[tuple[str, str], ...]] = {
    "ks-core": ((NAMESPACE, "kubesphere-secret"), (NAMESPACE, "ks-controller-manager-webhook-cert")),
    "redis": ((NAMESPACE, "redis-secret"),),
    "openldap": ((NAMESPACE, "openldap-secret"),),
    "minio": ((NAMESPACE, "minio"),),
    "monitoring": (("kubesphere-monitoring-system", "notification-manager-webhook-server-cert"),),
    "opensearch": (("kubesphere-logging-system", "opensearch-credentials"),),
    "devops": (("kubesphere-devops-system", "devops-jenkins"),),
}

#: The namespaces the original created for KubeSphere (where its leftovers are looked for).
NAMESPACES = (
    NAMESPACE, "kubesphere-controls-system", "kubesphere-monitoring-system", "kubesphere-monitoring-federated",
    "kubesphere-logging-system", "kubesphere-devops-system", "kubesphere-devops-worker", "istio-system",
    "kube-federation-system", "kubeedge", "gatekeeper-system", "weave", "argocd",
)
#: The kinds looked at for leftovers (those not served are skipped).
LEFTOVER_KINDS = (
    ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("v1", "ServiceAccount"),
    ("v1", "PersistentVolumeClaim"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"), ("batch/v1", "Job"), ("batch/v1", "CronJob"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("policy/v1", "PodDisruptionBudget"), ("networking.k8s.io/v1", "Ingress"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule"),
)
#: Cluster-scoped kinds looked at for leftovers: those of a Helm release in :data:`NAMESPACES`, or applied with
#: kubectl under a KubeSphere name.
CLUSTER_LEFTOVER_KINDS = (
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    ("apiregistration.k8s.io/v1", "APIService"), ("policy/v1beta1", "PodSecurityPolicy"),
    ("storage.k8s.io/v1", "StorageClass"),
)
#: The installer's own objects (its manifest or chart): never a leftover.
OWN_PREFIX = "ks-installer"


def now_rfc3339(ahead: float = 0) -> str:
    """The time now (plus ``ahead`` seconds) as managedFields entries and the status write it."""
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=ahead)).strftime("%Y-%m-%dT%H:%M:%SZ")


def legacy_entries(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The managedFields entries of the original installer's writes (not of a subresource)."""
    return [e for e in meta.get("managedFields") or [] if e.get("manager") in LEGACY_MANAGERS
            and e.get("operation") == "Update" and not e.get("subresource")]


def merge_fields(into: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """The union of two ``FieldsV1`` trees (``into`` is changed and returned)."""
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge_fields(into[key], value)
        elif key not in into or not into[key]:
            into[key] = copy.deepcopy(value)
    return into


def upgraded(meta: dict[str, Any], api_version: str) -> list[dict[str, Any]] | None:
    """``metadata.managedFields`` with the legacy managers' fields moved into the installer's ``Apply`` entry
    (None when there is nothing to move)."""
    entries = meta.get("managedFields") or []
    legacy = legacy_entries(meta)
    if not legacy:
        return None
    ours = next((e for e in entries if is_ours(e)), None)
    fields: dict[str, Any] = copy.deepcopy((ours or {}).get("fieldsV1") or {})
    for entry in legacy:
        merge_fields(fields, entry.get("fieldsV1") or {})
    entry = {"manager": FIELD_MANAGER, "operation": "Apply",
             "apiVersion": (ours or {}).get("apiVersion") or api_version, "time": now_rfc3339(),
             "fieldsType": "FieldsV1", "fieldsV1": fields}
    out = [e for e in entries if e is not ours and not any(e is x for x in legacy)]
    return [*out, entry]


#: Labels the API server sets itself (a Namespace's name): an apply's managed fields name them, no apply removes them.
SERVER_SET_LABELS = frozenset({"kubernetes.io/metadata.name"})


def dropped_by_takeover(live: dict[str, Any], body: dict[str, Any]) -> list[str]:
    """The labels and annotations of ``live`` that only the original's managers own and ``body`` (what the
    installer applies) does not set: what the takeover's apply removes, as ``metadata.<labels|annotations>.<key>``."""
    meta, ours = live.get("metadata") or {}, body.get("metadata") or {}
    owned: dict[str, set[str]] = {"labels": set(), "annotations": set()}
    others: dict[str, set[str]] = {"labels": set(), "annotations": set()}
    for entry in meta.get("managedFields") or []:
        fields = (entry.get("fieldsV1") or {}).get("f:metadata") or {}
        into = owned if entry in legacy_entries(meta) else others
        for part in into:
            into[part] |= {k[2:] for k in fields.get(f"f:{part}") or {} if k.startswith("f:")}
    return [f"metadata.{part}.{key}" for part in ("labels", "annotations")
            for key in sorted(owned[part] - others[part])
            if key in (meta.get(part) or {}) and key not in (ours.get(part) or {})
            and not (part == "labels" and key in SERVER_SET_LABELS)]


def release_records(api: client.ApiClient, module: str) -> Iterator[tuple[str, list[Any]]]:
    """``namespace/release`` and the release record Secrets of each of the original's Helm releases that
    ``module`` takes over (no records: the release is not there)."""
    core = client.CoreV1Api(api)
    for (namespace, release), owner in RELEASES.items():
        if owner != module:
            continue
        try:
            records = core.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={release}").items
        except ApiException as exc:
            if exc.status != 404:
                raise
            records = []
        yield f"{namespace}/{release}", records


def releases_to_retire(api: client.ApiClient, module: str) -> list[str]:
    """``namespace/release`` of the original's Helm releases that ``module``'s install retires (read only)."""
    return [release for release, records in release_records(api, module) if records]


def take_over(res: Any, meta: dict[str, Any], api_version: str, attempts: int = 5) -> list[str]:
    """Move the fields the original's managers own on the object (``meta``: its live metadata) to the installer
    (``res``: its DynamicClient resource); returns the managers whose fields moved. One JSON patch guarded by the
    resourceVersion; when the object changed meanwhile it is read again."""
    for _ in range(attempts):
        fields = upgraded(meta, api_version)
        if fields is None:
            return []
        managers = sorted({e["manager"] for e in legacy_entries(meta)})
        patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
                 {"op": "replace", "path": "/metadata/managedFields", "value": fields}]
        try:
            res.patch(body=patch, name=meta["name"], namespace=meta.get("namespace"), content_type=JSON_PATCH)
            return managers
        except ApiException as exc:
            if exc.status not in (409, 422):
                raise
        meta = res.get(name=meta["name"], namespace=meta.get("namespace")).to_dict()["metadata"]
    raise RuntimeError(f"{meta['name']}: changed by others while its fields were being taken over")


def retire_releases(api: client.ApiClient, module: str) -> list[str]:
    """Delete the release records of the original's Helm releases that ``module`` took over (never their
    objects); returns ``namespace/release`` of each release retired."""
    core = client.CoreV1Api(api)
    retired = []
    for release, records in release_records(api, module):
        for record in records:
            try:
                core.delete_namespaced_secret(record.metadata.name, record.metadata.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        if records:
            retired.append(release)
            log.info("Retired Helm release %s: its objects now belong to module %s", release, module)
    return retired


def _read_secret(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    try:
        return core.read_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def credentials_found(api: client.ApiClient, module: str) -> dict[str, dict[str, str]]:
    """``Secret/ns/name (keys a, b)`` → its data, of the module's credential Secrets that exist without its label
    (the original's, or made by hand): their values are to stay (:func:`credentials_kept` tells whether they did).
    The data stays in memory only."""
    core = client.CoreV1Api(api)
    found = {}
    for namespace, name in CREDENTIALS.get(module, ()):
        secret = _read_secret(core, namespace, name)
        if secret is not None and (secret.metadata.labels or {}).get(MODULE_LABEL) != module:
            found[f"Secret/{namespace}/{name} (keys {', '.join(sorted(secret.data or {}))})"] = dict(secret.data or {})
    return found


def credentials_kept(api: client.ApiClient, found: dict[str, dict[str, str]]) -> tuple[list[str], list[str]]:
    """Of the Secrets :func:`credentials_found` returned: those whose every key still has its value, and the others
    (as ``Secret/ns/name (keys a, b changed)``, names only)."""
    core = client.CoreV1Api(api)
    kept, changed = [], []
    for label, before in found.items():
        _, namespace, rest = label.split("/", 2)
        secret = _read_secret(core, namespace, rest.split(" ", 1)[0])
        data = (secret.data or {}) if secret is not None else {}
        differ = sorted(k for k, v in before.items() if data.get(k) != v)
        if differ:
            changed.append(f"{label.split(' ', 1)[0]} (keys {', '.join(differ)} changed)")
        else:
            kept.append(label)
    return kept, changed


def _left_over(meta: dict[str, Any], namespaces: set[str]) -> bool:
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if MODULE_LABEL in labels or meta["name"].startswith(OWN_PREFIX):
        return False
    if "namespace" in meta:
        return meta["namespace"] in namespaces and (
            LAST_APPLIED in annotations or labels.get(HELM_LABEL[0]) == HELM_LABEL[1])
    return annotations.get("meta.helm.sh/release-namespace") in namespaces or (
        LAST_APPLIED in annotations and "kubesphere" in meta["name"])


def leftovers(api: client.ApiClient) -> dict[str, list[str]]:
    """What the original made that no module took over: ``unadopted`` (``Kind/namespace/name`` of objects in
    :data:`NAMESPACES` with kubectl's last-applied annotation or Helm's label and no module label; ``Kind/name`` of
    cluster-scoped ones of a Helm release there, or applied with kubectl under a KubeSphere name) and
    ``helmReleases`` (``namespace/release`` of the Helm releases left there)."""
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    dyn = DynamicClient(api)
    wanted = set(NAMESPACES)
    objects = []
    for api_version, kind in (*LEFTOVER_KINDS, *CLUSTER_LEFTOVER_KINDS):
        try:
            res = dyn.resources.get(api_version=api_version, kind=kind)
            raw = res.get(serialize=False, header_params={
                "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
        except (ResourceNotFoundError, ApiException):
            continue
        for item in json.loads(raw.data).get("items") or []:
            meta = item["metadata"]
            if _left_over(meta, wanted):
                objects.append("/".join((kind, *([meta["namespace"]] if "namespace" in meta else []), meta["name"])))
    records = client.CoreV1Api(api).list_secret_for_all_namespaces(label_selector="owner=helm").items
    releases = {f"{r.metadata.namespace}/{(r.metadata.labels or {}).get('name', '')}" for r in records
                if r.metadata.namespace in wanted and not (r.metadata.labels or {}).get("name", "").startswith(
                    OWN_PREFIX)}
    return {"unadopted": sorted(objects), "helmReleases": sorted(releases)}


class Takeover:
    """One reconcile's part in taking over the original's installation: before a module's first install, the
    credentials it will keep; after that install succeeded, the Helm releases it took over are retired; once every
    module has run, what was left is logged and written to ``status.adoption`` — when the reconcile started without
    any state (the first one over an existing installation) or a module found the original's credentials or
    releases. Upgrades and later toggles of modules the original never installed cost no extra API call."""

    def __init__(self, api: client.ApiClient, first: bool) -> None:
        self.api = api
        self.found = first
        self.credentials: dict[str, dict[str, dict[str, str]]] = {}

    def before(self, module: str) -> None:
        self.credentials[module] = credentials_found(self.api, module)

    def after(self, module: str) -> list[str]:
        if module not in self.credentials:  # an upgrade: what it took over was retired by its install
            return []
        kept, changed = credentials_kept(self.api, self.credentials.pop(module))
        if kept:
            log.info("[%s] kept the credentials that were there: %s", module, "; ".join(kept))
        if changed:
            log.warning("[%s] replaced credentials that were there: %s", module, "; ".join(changed))
        retired = retire_releases(self.api, module)
        self.found = self.found or bool(kept or changed or retired)
        return retired

    def report(self, status: Any) -> None:
        """Log and record (``status.update``) what no module took over, after a reconcile that took something over
        or started without state."""
        if not self.found:
            return
        found = leftovers(self.api)
        if found["unadopted"]:
            log.warning("Left as they are (made by the original installer, no module makes them now): %s",
                        ", ".join(found["unadopted"]))
        if found["helmReleases"]:
            log.warning("Helm releases no module takes over, left as they are: %s", ", ".join(found["helmReleases"]))
        status.update({"adoption": found if any(found.values()) else None})
