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
            try:
                before = res.get(name=name, namespace=p["namespace"])
            except NotFoundError:
                missing.append(name)
                continue
            if before.metadata.deletionTimestamp:
                missing.append(name)
                continue
            metadata = {"name": name, **({"namespace": p["namespace"]} if p["namespace"] else {})}
            if p["state"] == "present":
                metadata |= {key: {k: str(v) for k, v in p[key].items()}
                             for key in ("labels", "annotations") if p[key]}
            body = {"apiVersion": p["api_version"], "kind": p["kind"], "metadata": metadata}
            after = res.server_side_apply(body=body, name=name, namespace=p["namespace"],
                                          field_manager=p["field_manager"], force_conflicts=True)
            if before.metadata.resourceVersion != after.metadata.resourceVersion:
                changed.append(name)
    except Exception as exc:  # API errors become a task failure with their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    return {"changed": bool(changed), "updated": changed, "missing": missing}


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """The labels and annotations :func:`run` would set on (or take off) each object, as one update each
    (``installer.manifests.Change``; offline, none)."""
    if api is None:
        return []
    from installer.manifests import Change, shown

    p = preview_params(ARGUMENT_SPEC, args)
    res = DynamicClient(api).resources.get(api_version=p["api_version"], kind=p["kind"])
    present = p["state"] == "present"
    out = []
    for name in p["names"] or []:
        try:
            live = res.get(name=name, namespace=p["namespace"]).to_dict()
        except NotFoundError:
            continue
        fields = []
        for section in ("labels", "annotations"):
            have = live["metadata"].get(section) or {}
            for key, value in (p[section] or {}).items():
                if present and have.get(key) != str(value):
                    fields.append(f"metadata.{section}.{key}: {shown(have.get(key))} -> {shown(str(value))}"
                                  if key in have else f"metadata.{section}.{key}: + {shown(str(value))}")
                elif not present and key in have:
                    fields.append(f"metadata.{section}.{key}: - {shown(have[key])}")
        if fields:
            ns = p["namespace"]
            out.append(Change(f"{res.kind}/{ns + '/' if ns else ''}{name}", "update", fields))
    return out
