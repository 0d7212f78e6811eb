"""ks_metadata: own a few labels or annotations on objects the installer does not own (namespaces, nodes,
built-in ClusterRoles)."""

from __future__ import annotations

from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from installer.ansible_tasks import TaskFailed, preview_params
from installer.kube import api_client

ARGUMENT_SPEC: dict[str, Any] = {
    "api_version": {"type": "str", "default": "v1"},
    "kind": {"type": "str", "default": "Namespace"},
    "names": {"type": "list", "elements": "str", "required": True},
    "namespace": {"type": "str"},
    "labels": {"type": "dict", "default": {}},
    "annotations": {"type": "dict", "default": {}},
    "field_manager": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
}
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
    apply as a server-side dry run (``installer.manifests.Change``; offline, none)."""
    if api is None:
        return []
    from installer.manifests import Change, shown

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
