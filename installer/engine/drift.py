"""Drift: objects a module applied that are gone, replaced, or that someone changed where only the installer decides.

Cheap by design: one label-selector list per kind across all modules, compared with the inventories in the
state store. No playbook runs; only the modules with drift are re-applied. What counts comes from what the API server
wrote, never from a manager's name or an entry's time (whoever writes an object can set both):

- **missing**: the object is gone (or lost the module's label);
- **replaced**: its UID is not the one the installer's write returned (someone deleted it and made their own);
- **denied content**: another writer added what only the installer may add there (installer.objects.foreign's
  deny-list: a container, a volume, a webhook item, an RBAC rule, a Service port);
- **changed**: the installer's own fields on it no longer hold what its last write left (the guard digest recorded
  then): someone took one of its fields, or wrote a value under its name. Fields controllers rewrite as their job
  (a webhook's failurePolicy, a caBundle, replicas) are left to them until the module's next run.

Fields the render does not set (a label, an annotation, a finalizer, ``imagePullSecrets``) are other writers' and
are never drift. A record kept before UIDs were recorded is checked for missing objects and denied content only.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from installer.engine.records import Record, object_key
from installer.escape import escaped
from installer.objects.foreign import (
    TAKEN_OVER_KINDS,
    clean,
    foreign_paths,
    installer_paths,
    is_ours,
    leaves,
    tolerated,
    tops,
)
from installer.objects.inventory import METADATA_LISTED, facts_of
from installer.objects.manifests import opted_out
from installer.objects.pruning import labelled_items, side_by_side
from installer.objects.refs import Ref
from installer.settings import MODULE_LABEL


def _describe(ref: Ref) -> str:
    _, kind, namespace, name = ref
    return f"{kind}/{namespace + '/' if namespace else ''}{name}"


def foreign_fields(item: dict[str, Any], kind: str) -> str | None:
    """``manager: paths`` of the denied content other writers own on an object, or None."""
    entries = item["metadata"].get("managedFields") or []
    if clean(kind, entries):
        return None
    ours = installer_paths(entries)
    found = [f"{escaped(str(e.get('manager') or 'unknown'), 128)}: {', '.join(tops(paths))}"
             for e in entries if (paths := foreign_paths(kind, e, ours=ours))]
    return "; ".join(found) or "the installer's own apply entry is missing"


def writers(obj: dict[str, Any]) -> str:
    """``manager: paths`` of every other writer of an object (status and the fields controllers rewrite aside): who
    may have taken the installer's fields."""
    found = []
    for entry in obj["metadata"].get("managedFields") or []:
        if is_ours(entry) or entry.get("subresource"):
            continue
        paths = [p for p in leaves(entry.get("fieldsV1") or {}) if p[0] != "f:status" and not tolerated(p)]
        if paths:
            found.append(f"{escaped(str(entry.get('manager') or 'unknown'), 128)}: {', '.join(tops(paths))}")
    return "; ".join(found) or "the installer's own field manager"


def _labelled(dyn: DynamicClient, api_version: str, kind: str, metadata_only: bool,
              modules: Iterable[str]) -> dict[tuple[str, str], Any]:
    """``(namespace, name)`` → every object of a kind that carries the label of one of ``modules`` (as a dict;
    ``metadata_only``: its metadata alone, what a check for missing objects needs, from the API server's cache:
    the objects it looks for were made long before, and the schedule's drift check reads etcd)."""
    try:
        res = dyn.resources.get(api_version=api_version, kind=kind)
    except ResourceNotFoundError:
        return {}
    return {(i["metadata"].get("namespace") or "", i["metadata"]["name"]): i
            for i in labelled_items(res, metadata_only or kind in METADATA_LISTED, modules, from_cache=metadata_only)}


def find_drift(api: client.ApiClient, records: dict[str, Record], missing_only: bool = False) -> dict[str, list[str]]:
    """Per module, what drifted: ``"Deployment/ns/name missing"`` or (unless ``missing_only``) ``"... changed by
    kubectl-edit"``. The lists (one per kind) are made side by side."""
    wanted: dict[tuple[str, str], dict[tuple[str, str], tuple[str, Ref]]] = defaultdict(dict)
    for name, record in records.items():
        if record.installed and record.intent is None:
            for ref in record.inventory:
                wanted[(ref[0], ref[1])][(ref[2], ref[3])] = (name, ref)
    dyn = DynamicClient(api)
    kinds = sorted(wanted)
    for api_version, kind in kinds:  # discovery once, before the lists run side by side
        with contextlib.suppress(ResourceNotFoundError):
            dyn.resources.get(api_version=api_version, kind=kind)
    # Only the checked modules' objects: an object labelled for another module counts as missing either way.
    checked = {module for by_key in wanted.values() for module, _ in by_key.values()}
    lists = side_by_side(lambda k: _labelled(dyn, k[0], k[1], missing_only, checked), kinds)
    drift: dict[str, list[str]] = defaultdict(list)
    for (api_version, kind), live in zip(kinds, lists, strict=True):
        for key, (module, ref) in sorted(wanted[(api_version, kind)].items()):
            item = live.get(key)
            if item is None or (item["metadata"].get("labels") or {}).get(MODULE_LABEL) != module:
                drift[module].append(f"{_describe(ref)} missing")
                continue
            known = records[module].objects.get(object_key(ref))
            if known is not None and item["metadata"].get("uid") != known[0]:
                drift[module].append(f"{_describe(ref)} replaced by an object the installer did not make")
            elif missing_only or opted_out(item["metadata"]):
                continue  # (an object a user opted out is left to them: installer.objects.manifests.opted_out)
            elif kind in TAKEN_OVER_KINDS and (fields := foreign_fields(item, kind)) is not None:
                drift[module].append(f"{_describe(ref)} changed by {fields}")
            elif known is not None and facts_of(item, kind in METADATA_LISTED)[1] != known[1]:
                drift[module].append(f"{_describe(ref)} changed by {writers(item)}")
    return dict(drift)
