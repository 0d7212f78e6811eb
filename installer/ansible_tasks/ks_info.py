"""ks_info: read Kubernetes objects (one by name, or a list by namespace and label selector)."""

from __future__ import annotations

from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.ansible_tasks import TaskFailed
from installer.kube import api_client

ARGUMENT_SPEC: dict[str, Any] = {
    "api_version": {"type": "str", "default": "v1"},
    "kind": {"type": "str", "required": True},
    "name": {"type": "str"},
    "namespace": {"type": "str"},
    "label_selector": {"type": "str"},
    "keys_only": {"type": "bool", "default": False},
}
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
