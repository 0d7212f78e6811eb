"""Jinja filters of the redis role."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _claim(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The claim spec of a PersistentVolumeClaim, or of a StatefulSet's first volume claim template."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "StatefulSet":
        templates = spec.get("volumeClaimTemplates") or [{}]
        return templates[0].get("spec") or {}
    return spec


def ks_redis_live_claim(objects: list[Mapping[str, Any]]) -> dict[str, str]:
    """``{"storage": ..., "storageClassName": ...}`` of the first object with a sized claim, else ``{}``
    (a StorageClass the claim does not name is left out)."""
    for obj in objects:
        claim = _claim(obj)
        storage = ((claim.get("resources") or {}).get("requests") or {}).get("storage")
        if storage:
            out = {"storage": str(storage)}
            if claim.get("storageClassName"):
                out["storageClassName"] = str(claim["storageClassName"])
            return out
    return {}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_redis_live_claim": ks_redis_live_claim}
