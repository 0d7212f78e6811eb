"""The volume an existing workload already has, so a re-render keeps its size and StorageClass."""

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


def live_claim(objects: list[Mapping[str, Any]]) -> dict[str, str]:
    """``{"storage": ..., "storageClassName": ...}`` of the first object with a sized claim (put a live
    StatefulSet before the volume of its first replica: its template cannot change), else ``{}``; a
    StorageClass the claim does not name is left out."""
    for obj in objects:
        claim = _claim(obj)
        storage = ((claim.get("resources") or {}).get("requests") or {}).get("storage")
        if storage:
            out = {"storage": str(storage)}
            if claim.get("storageClassName") is not None:
                out["storageClassName"] = str(claim["storageClassName"])
            return out
    return {}
