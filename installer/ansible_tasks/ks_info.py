"""ks_info: read Kubernetes objects (one by name, or a list by namespace and label selector)."""

from __future__ import annotations

from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.ansible_tasks import TaskFailed, argument_spec, task_plugin
from installer.objects.kube import api_client

DOCUMENTATION = r"""
module: ks_info
short_description: Get objects of one kind; a missing object or an unserved kind gives an empty list.
options:
  api_version: {description: apiVersion of the kind., type: str, default: v1}
  kind: {description: Kind to read., type: str, required: true}
  name: {description: Object name; omit to list., type: str}
  namespace: {description: Namespace; omit for cluster-scoped kinds or all namespaces., type: str}
  label_selector: {description: Label selector when listing., type: str}
  keys_only:
    description: Return only the keys of each object's data (values blanked), e.g. to check a Secret's keys
      without its values reaching a result or job event.
    type: bool
    default: false
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = True


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        res = DynamicClient(api_client()).resources.get(api_version=p["api_version"], kind=p["kind"])
        found = res.get(name=p["name"], namespace=p["namespace"], label_selector=p["label_selector"]).to_dict()
        resources = found.get("items", []) if p["name"] is None else [found]
    except (NotFoundError, ResourceNotFoundError):
        resources = []
    except Exception as exc:  # API errors become a task failure with their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    if p["keys_only"]:
        for item in resources:
            for field in ("data", "stringData", "binaryData"):
                if isinstance(item.get(field), dict):
                    item[field] = dict.fromkeys(item[field], "")
    return {"changed": False, "resources": resources}


# --- In a render (installer.ansible_tasks._record): recorded, then answered from the offline world or read from the
# cluster; a wait (a task with ``until``) for Endpoints or a CustomResourceDefinition that the cluster cannot answer
# yet (the render's own modules would create them) is answered as ready, so a render never waits.


def _from_world(objects: dict[str, list[dict[str, Any]]], params: dict[str, Any]) -> list[dict[str, Any]]:
    name, namespace = params.get("name"), params.get("namespace")
    return [o for o in objects.get(params.get("kind"), [])
            if (not name or o["metadata"]["name"] == name)
            and (not namespace or o["metadata"].get("namespace") == namespace)]


def _ready(kind: str, resources: list[dict[str, Any]]) -> bool:
    if kind == "Endpoints":
        return any(s.get("addresses") for r in resources for s in r.get("subsets") or [])
    if kind == "CustomResourceDefinition":
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for r in resources for c in (r.get("status") or {}).get("conditions") or [])
    return bool(resources)


def _assumed_ready(params: dict[str, Any]) -> list[dict[str, Any]]:
    meta = {"name": params.get("name") or "", **({"namespace": params["namespace"]} if params.get("namespace") else {})}
    if params.get("kind") == "Endpoints":
        return [{"metadata": meta, "subsets": [{"addresses": [{"ip": "192.0.2.1"}]}]}]
    if params.get("kind") == "CustomResourceDefinition":
        return [{"metadata": meta, "status": {"conditions": [{"type": "Established", "status": "True"}]}}]
    return []


def render(params: dict[str, Any], host: str, waits: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """What the task answers in a render, and what is recorded of it."""
    from installer.ansible_tasks._record import plain, with_generated, world

    offline = world()
    if offline is not None:
        return {"resources": with_generated(host, plain(params), _from_world(offline, params))}, None
    args = {key: spec.get("default") for key, spec in ARGUMENT_SPEC.items()} | plain(params)
    try:
        resources = run(args)["resources"]
    except TaskFailed as exc:
        return {"failed": True, "msg": exc.msg}, None
    if waits and params.get("name") and not _ready(args["kind"], resources):
        assumed = _assumed_ready(args)
        if assumed:
            return {"resources": assumed}, {"assumed_ready": True}
    return {"resources": with_generated(host, args, resources)}, None
