"""ks_manifest: apply or remove a module's Kubernetes objects (see installer.manifests)."""

from __future__ import annotations

import os
from typing import Any

from kubernetes.client.exceptions import ApiException

from installer.ansible_tasks import TaskFailed
from installer.kube import api_client
from installer.manifests import (
    INVENTORY_ENV,
    PURGE_ENV,
    Manifests,
    Rejected,
    api_reason,
    load_definitions,
    read_inventory,
    read_recorded,
    ref_of,
)

ARGUMENT_SPEC: dict[str, Any] = {
    "module": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "definition": {"type": "raw", "default": []},
    "apply": {"type": "bool", "default": True},
    "create_only": {"type": "bool", "default": False},
    "wait": {"type": "bool", "default": False},
    "wait_timeout": {"type": "int", "default": 600},
    "purge": {"type": "bool", "default": None},
    "kinds": {"type": "list", "elements": "str", "default": []},
    "tenants": {"type": "list", "elements": "str", "default": []},
    "keep": {"type": "list", "elements": "str", "default": []},
}
SUPPORTS_CHECK_MODE = False


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        objects = load_definitions(p["definition"])
        manifests = Manifests(api_client(), p["module"])
        if p["state"] == "present" and not p["apply"]:
            # What the recorded inventory has and neither these objects nor this run so far name goes now.
            current = [ref_of(o) for o in objects] + read_inventory(os.environ.get(INVENTORY_ENV) or "")
            result = manifests.prune_inventory(read_recorded() or [], current, propagation="Foreground",
                                               timeout=p["wait_timeout"])
        elif p["state"] == "present" and p["create_only"]:
            result = manifests.create_missing(objects)
        elif p["state"] == "present":
            result = manifests.apply(objects)
            if p["wait"]:
                manifests.wait_ready(objects, p["wait_timeout"])
        else:
            purge = p["purge"] if p["purge"] is not None else os.environ.get(PURGE_ENV) == "1"
            result = manifests.absent(objects, read_recorded(), purge=purge, timeout=p["wait_timeout"],
                                      kinds=p["kinds"], tenants=p["tenants"], keep=p["keep"])
    except Rejected as exc:  # the API server's own reason and the object: what status and the log show
        raise TaskFailed(str(exc)) from exc
    except ApiException as exc:
        raise TaskFailed(api_reason(exc)) from exc
    except Exception as exc:  # timeouts and the rest: their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    result.record()
    return {"changed": bool(result.changed or result.deleted), "applied": result.applied,
            "updated": result.changed, "deleted": result.deleted, "kept": result.kept,
            "adopted": result.adopted, "immutable": result.immutable}
