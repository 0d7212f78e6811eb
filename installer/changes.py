"""Explain what changed between two input sets, field by field, without revealing secrets."""

from __future__ import annotations

import json
from typing import Any

from deepdiff import DeepDiff

from installer.config.secrets import SECRET_PATHS

UNSET = "<unset>"
REDACTED = "<redacted>"


def _fmt(value: Any) -> str:
    if value is UNSET or type(value).__name__ == "NotPresent":
        return UNSET
    return json.dumps(value, sort_keys=True, default=str)


def _is_secret(path: str) -> bool:
    return any(path == s or path.startswith(s + ".") or s.startswith(path + ".") for s in SECRET_PATHS)


def _dotted(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``["common.redis.enabled: false -> true", ...]`` for every leaf that differs."""
    diff = DeepDiff(old, new, view="tree", verbose_level=2)
    lines = []
    for level in sorted((lv for levels in diff.values() for lv in levels), key=lambda lv: lv.path()):
        path = _dotted(level.path(output_format="list"))
        before, after = _fmt(level.t1), _fmt(level.t2)
        if _is_secret(path):
            before, after = (REDACTED if before != UNSET else UNSET), (REDACTED if after != UNSET else UNSET)
        lines.append(f"{path}: {before} -> {after}")
    return lines
