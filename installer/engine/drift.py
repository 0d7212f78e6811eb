"""Drift: objects a module applied that are gone, or that someone else changed since.

Cheap by design: one label-selector list per kind across all modules, compared with the inventories in the
state store. No playbook runs; only the modules with drift are re-applied.

For the kinds whose foreign fields the apply removes (installer.objects.foreign), an object drifted when a writer other
than the installer's apply owns a field only the installer may own: someone changed a field it renders (the
write moves the field to them) or added one (a sidecar, an env variable, a webhook). That reads the object's field
sets only, never a manager's name or an entry's time, which whoever writes the object can forge. The repair's
apply takes those fields over and removes them, so the next check finds nothing. Other kinds keep the rule by
time: a manager other than Kubernetes' own wrote after the module's last run.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from installer.engine.records import Record
from installer.escape import escaped
from installer.objects.foreign import TAKEN_OVER_KINDS, clean, foreign_paths, installer_paths, tops
from installer.objects.manifests import Ref
from installer.settings import FIELD_MANAGER, MODULE_LABEL


def _describe(ref: Ref) -> str:
    _, kind, namespace, name = ref
    return f"{kind}/{namespace + '/' if namespace else ''}{name}"


def _time(entry: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(str(entry.get("time") or "1970-01-01T00:00:00Z").replace("Z", "+00:00"))


#: Kubernetes' own components (their manager names may carry a version suffix), which write metadata of their
#: own; the installer's helpers use managers named ``ks-installer-<purpose>``.
SYSTEM_MANAGERS = ("kube-controller-manager", "kube-scheduler", "kube-apiserver", "kubelet")


def foreign_editor(item: Any, since: dt.datetime) -> str | None:
    """The field manager that wrote the object (not its status) after ``since``, the end of the module's last
    successful run: a person or another tool, not the installer or Kubernetes itself. A repair run moves
    ``since``, so an edit the installer does not own (an extra label) is re-applied over once, not forever."""
    for entry in item.metadata.get("managedFields") or []:
        entry = dict(entry)
        manager = str(entry.get("manager") or "")
        if manager.startswith((FIELD_MANAGER, *SYSTEM_MANAGERS)) or entry.get("subresource"):
            continue
        if _time(entry) > since:
            return escaped(entry.get("manager") or "unknown", 128)
    return None


def foreign_fields(item: Any, kind: str) -> str | None:
    """``manager: paths`` of the fields other writers own on an object of the kinds the apply cleans, or None."""
    entries = item.to_dict()["metadata"].get("managedFields") or []
    if clean(kind, entries):
        return None
    ours = installer_paths(entries)
    found = [f"{escaped(str(e.get('manager') or 'unknown'), 128)}: {', '.join(tops(paths))}"
             for e in entries if (paths := foreign_paths(kind, e, ours=ours))]
    return "; ".join(found) or "the installer's own apply entry is missing"


def find_drift(api: client.ApiClient, records: dict[str, Record], missing_only: bool = False) -> dict[str, list[str]]:
    """Per module, what drifted: ``"Deployment/ns/name missing"`` or (unless ``missing_only``) ``"... changed by
    kubectl-edit"``."""
    wanted: dict[tuple[str, str], dict[tuple[str, str], tuple[str, Ref]]] = defaultdict(dict)
    for name, record in records.items():
        if record.installed and record.intent is None:
            for ref in record.inventory:
                wanted[(ref[0], ref[1])][(ref[2], ref[3])] = (name, ref)
    dyn = DynamicClient(api)
    drift: dict[str, list[str]] = defaultdict(list)
    for (api_version, kind), expected in sorted(wanted.items()):
        try:
            items = dyn.resources.get(api_version=api_version, kind=kind).get(label_selector=MODULE_LABEL).items
        except ResourceNotFoundError:
            items = []
        live = {(i.metadata.namespace or "", i.metadata.name): i for i in items}
        for key, (module, ref) in sorted(expected.items()):
            item = live.get(key)
            if item is None or (item.metadata.labels or {}).get(MODULE_LABEL) != module:
                drift[module].append(f"{_describe(ref)} missing")
            elif missing_only:
                continue
            elif kind in TAKEN_OVER_KINDS:
                if (fields := foreign_fields(item, kind)) is not None:
                    drift[module].append(f"{_describe(ref)} changed by {fields}")
            elif editor := foreign_editor(item, _time({"time": records[module].applied_at})):
                drift[module].append(f"{_describe(ref)} changed by {editor}")
    return dict(drift)
