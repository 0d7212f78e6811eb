"""ks_metadata: own a few labels or annotations on objects the installer does not own (namespaces, nodes,
built-in ClusterRoles)."""

from __future__ import annotations

from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from installer.ansible_tasks import TaskFailed, argument_spec, preview_params, task_plugin
from installer.objects.kube import api_client

DOCUMENTATION = r"""
module: ks_metadata
short_description: Server-side apply only metadata.labels and metadata.annotations of existing objects.
description:
  - For several objects of one kind in one call, without the module label. An object is never created, adopted,
    pruned or deleted; missing ones (or ones being deleted) are reported (missing), not an error. Absent gives
    the labels and annotations back (the field manager stops owning them, so the API server removes those no other
    manager owns, e.g. one that `kubectl label` set before).
options:
  api_version: {description: apiVersion of the objects., type: str, default: v1}
  kind: {description: Kind of the objects., type: str, default: Namespace}
  names: {description: Names of the objects., type: list, elements: str, required: true}
  namespace: {description: Namespace of the objects; omit for cluster-scoped kinds., type: str}
  labels: {description: Labels to own., type: dict, default: {}}
  annotations: {description: Annotations to own., type: dict, default: {}}
  field_manager: {description: Field manager that owns them (one per use, kept across versions)., type: str,
                  required: true}
  state: {description: present sets them; absent removes them., type: str, choices: [present, absent], default: present}
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = False


def run(p: dict[str, Any]) -> dict[str, Any]:
    changed, missing = [], []
    try:
        res = DynamicClient(api_client()).resources.get(api_version=p["api_version"], kind=p["kind"])
        for name in p["names"]:
            applied = apply(res, name, p)
            if applied is None:
                missing.append(name)
            elif applied[0]["metadata"]["resourceVersion"] != applied[1]["metadata"]["resourceVersion"]:
                changed.append(name)
    except Exception as exc:  # API errors become a task failure with their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    return {"changed": bool(changed), "updated": changed, "missing": missing}


def apply(res: Any, name: str, p: dict[str, Any], dry_run: bool = False) -> tuple[dict[str, Any], ...] | None:
    """Apply the labels and annotations (``state: absent``: none, which takes the field manager's off) to one
    object; the object before and after (``dry_run``: as it would be), or None when it is missing or going."""
    try:
        before = res.get(name=name, namespace=p["namespace"])
    except NotFoundError:
        return None
    if before.metadata.deletionTimestamp:
        return None
    metadata = {"name": name, **({"namespace": p["namespace"]} if p["namespace"] else {})}
    if p["state"] == "present":
        metadata |= {key: {k: str(v) for k, v in p[key].items()} for key in ("labels", "annotations") if p[key]}
    body = {"apiVersion": p["api_version"], "kind": p["kind"], "metadata": metadata}
    after = res.server_side_apply(body=body, name=name, namespace=p["namespace"], field_manager=p["field_manager"],
                                  force_conflicts=True, **({"dry_run": "All"} if dry_run else {}))
    return before.to_dict(), after.to_dict()


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """The labels and annotations :func:`run` would set on (or take off) each object, as one update each: the same
    apply as a server-side dry run (``installer.objects.results.Change``; offline, none)."""
    if api is None:
        return []
    from installer.objects.repair import shown
    from installer.objects.results import Change

    p = preview_params(ARGUMENT_SPEC, args)
    res = DynamicClient(api).resources.get(api_version=p["api_version"], kind=p["kind"])
    out = []
    for name in p["names"] or []:
        applied = apply(res, name, p, dry_run=True)
        if applied is None:
            continue
        fields = []
        for section in ("labels", "annotations"):
            old, new = (o["metadata"].get(section) or {} for o in applied)
            for key in sorted(set(old) | set(new)):
                path = f"metadata.{section}.{key}"
                if key not in old:
                    fields.append(f"{path}: + {shown(new[key])}")
                elif key not in new:
                    fields.append(f"{path}: - {shown(old[key])}")
                elif old[key] != new[key]:
                    fields.append(f"{path}: {shown(old[key])} -> {shown(new[key])}")
        if fields:
            ns = p["namespace"]
            out.append(Change(f"{res.kind}/{ns + '/' if ns else ''}{name}", "update", fields))
    return out
