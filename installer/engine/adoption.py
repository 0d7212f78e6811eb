"""Taking over a cluster that ks-installer v3.4.1 installed.

The original applied its objects with ``kubectl apply`` (client-side: field manager ``kubectl-client-side-apply``
and the ``kubectl.kubernetes.io/last-applied-configuration`` annotation), ``kubectl create`` and Helm (manager
``helm``, label ``app.kubernetes.io/managed-by: Helm``, annotations ``meta.helm.sh/release-*`` and one release
record Secret per revision). On the first reconcile each module applies its objects over what is there:

- **Fields** (installer.objects.field_takeover, in the module's run): the fields those managers own move to the
installer's
  server-side apply entry; nothing is deleted, and a workload whose pod template stays as it was is not restarted.
- **Helm releases** (:func:`retire_releases`, after the module's run succeeded): the release record Secrets of
  the releases the module took over (the registry's ``Module.releases``) are deleted, never their objects, so
  ``helm list`` no longer shows them and a ``helm uninstall`` can no longer delete what the module now owns.
- **Credentials** (the registry's ``Module.credentials``): the generated Secrets keep the values they have
  (installer.objects.random_secret, installer.objects.core_secret, installer.objects.certs); :class:`Takeover` logs
  which ones a module found (names and key names, never values).
- **What no module makes** (:func:`leftovers`): objects without a module label that the original's records name
  (its fixed object names, the manifests of its Helm releases; installer.objects.originals), and Helm releases no
  module takes over, are logged and listed in ``status.adoption``; they are never deleted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.modules import MODULES, get_module
from installer.objects.originals import Key, helm_records, named_by_original, release_objects
from installer.settings import MODULE_LABEL

log = logging.getLogger("installer")

#: The original's Helm releases, ``(namespace, release)`` → the module that makes their objects now (the registry's
#: ``Module.releases``).
RELEASES: dict[tuple[str, str], str] = {release: m.name for m in MODULES for release in m.releases}

#: The namespaces the original created for KubeSphere (where its leftovers are looked for): the modules' own
#: (the registry's ``Module.namespaces``), not the cluster's ``kube-system``.
NAMESPACES = tuple(dict.fromkeys(ns for m in MODULES for ns in m.namespaces if ns != "kube-system"))
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


def release_records(api: client.ApiClient, module: str) -> Iterator[tuple[str, list[Any]]]:
    """``namespace/release`` and the release record Secrets of each of the original's Helm releases that
    ``module`` takes over (no records: the release is not there)."""
    core = client.CoreV1Api(api)
    for namespace, release in get_module(module).releases:
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
    """``Secret/ns/name`` → its data, of the module's credential Secrets that exist without its label (the
    original's, or made by hand): their values are to stay (:func:`credentials_kept` tells whether they did). The
    data stays in memory only."""
    core = client.CoreV1Api(api)
    found = {}
    for namespace, name in get_module(module).credentials:
        secret = _read_secret(core, namespace, name)
        if secret is not None and (secret.metadata.labels or {}).get(MODULE_LABEL) != module:
            found[f"Secret/{namespace}/{name}"] = dict(secret.data or {})
    return found


def credentials_kept(api: client.ApiClient, found: dict[str, dict[str, str]]) -> tuple[list[str], list[str]]:
    """Of the Secrets :func:`credentials_found` returned: those whose every key still has its value, and the others,
    each as ``Secret/ns/name (keys a, b)`` with the keys the run generated, and for the others the keys it changed
    (:func:`_keys_said`; key names only)."""
    core = client.CoreV1Api(api)
    kept, changed = [], []
    for ref, before in found.items():
        _, namespace, name = ref.split("/", 2)
        secret = _read_secret(core, namespace, name)
        data = (secret.data or {}) if secret is not None else {}
        differ = sorted(k for k, v in before.items() if data.get(k) != v)
        generated = sorted(k for k in data if k not in before)
        same = sorted(k for k in before if k not in differ)
        (changed if differ else kept).append(f"{ref} ({_keys_said(same, differ, generated)})")
    return kept, changed


def _keys_said(same: list[str], differ: list[str], generated: list[str]) -> str:
    """The keys of a found Secret after the run: ``keys a, b`` (all kept), else which were kept, changed and
    generated (``keys kept: none; generated: auth``, ``keys a changed; generated: b``)."""
    if differ:
        parts = [f"keys {', '.join(differ)} changed", *([f"kept: {', '.join(same)}"] if same else [])]
    elif generated:
        parts = [f"keys kept: {', '.join(same) or 'none'}"]
    else:
        return f"keys {', '.join(same)}"
    return "; ".join([*parts, *([f"generated: {', '.join(generated)}"] if generated else [])])


def _left_over(kind: str, meta: dict[str, Any], namespaces: set[str], released: set[Key]) -> bool:
    """Whether an object is the original's and no module's: named by the original's records
    (installer.objects.originals), in a KubeSphere namespace or cluster-scoped, without a module label."""
    if MODULE_LABEL in (meta.get("labels") or {}) or meta["name"].startswith(OWN_PREFIX):
        return False
    namespace = meta.get("namespace") or ""
    return (not namespace or namespace in namespaces) and named_by_original((kind, namespace, meta["name"]), released)


def leftovers(api: client.ApiClient) -> dict[str, list[str]]:
    """What the original made that no module took over: ``unadopted`` (``Kind/namespace/name``, or ``Kind/name`` of
    a cluster-scoped object, of objects without a module label that the original's records name: its fixed object
    names, or the manifest of a Helm release left in :data:`NAMESPACES`) and ``helmReleases`` (``namespace/release``
    of the Helm releases left there)."""
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    dyn = DynamicClient(api)
    wanted = set(NAMESPACES)
    records = [r for r in helm_records(api, wanted)
               if not (r.metadata.labels or {}).get("name", "").startswith(OWN_PREFIX)]
    released = release_objects(records, {kind for _, kind in CLUSTER_LEFTOVER_KINDS})
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
            if _left_over(kind, meta, wanted, released):
                objects.append("/".join((kind, *([meta["namespace"]] if "namespace" in meta else []), meta["name"])))
    releases = {f"{r.metadata.namespace}/{(r.metadata.labels or {}).get('name', '')}" for r in records}
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
