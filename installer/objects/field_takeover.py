"""Taking over an object's fields from the installer that applied it before (ks-installer v3.4.1's ``kubectl apply``,
``kubectl create`` and Helm: their field managers, the ``kubectl.kubernetes.io/last-applied-configuration`` annotation).

The fields those managers own are moved to the installer's ``Apply`` entry in one JSON patch of
``metadata.managedFields`` guarded by the object's resourceVersion (what client-go's ``csaupgrade.UpgradeManagedFields``
does), before the server-side apply of an object that exists without the module's label
(:class:`installer.objects.manifests.Manifests` and the credential writers call :func:`take_over`). The apply that
follows then removes the fields only they owned and the installer does not set (the last-applied annotation, Helm's
annotations) and keeps every other value. Controllers' entries (kube-controller-manager, the operators) are left alone.
Nothing is deleted; a workload whose pod template the apply leaves as it was is not restarted. The rest of a takeover
(Helm releases retired, credentials kept, leftovers listed) is the engine's: installer.engine.adoption.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from kubernetes.client.exceptions import ApiException

from installer.objects.foreign import is_ours
from installer.settings import FIELD_MANAGER

#: The field managers of the original installer's writes (``kubectl apply``/``create``, Helm 3). Entries of
#: other managers (controllers, operators, users' ``kubectl edit``) keep their fields.
LEGACY_MANAGERS = frozenset({"kubectl-client-side-apply", "kubectl-create", "kubectl", "helm"})
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
HELM_LABEL = ("app.kubernetes.io/managed-by", "Helm")
JSON_PATCH = "application/json-patch+json"


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
