"""Explain what changed between two input sets, field by field, without revealing secrets."""

from __future__ import annotations

import json
import re
from typing import Any

from installer.config.secrets import is_credential, is_secret, redact
from installer.spec import get, nested

UNSET = "<unset>"
REDACTED = "<redacted>"


def _fmt(value: Any, path: str) -> str:
    if value is UNSET or type(value).__name__ == "NotPresent":
        return UNSET
    if isinstance(value, dict | list):  # a whole section: hide the credentials inside it
        plain = re.sub(r"\[\d+\]", "", path)
        if is_credential(plain):  # inside a section that is a credential as a whole
            return REDACTED
        value = get(redact(nested(plain, value)), plain)
    return json.dumps(value, sort_keys=True, default=str)


def _hide(value: Any, shown: str) -> str:
    return shown if shown == UNSET or isinstance(value, dict | list) else REDACTED


def _dotted(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``["common.redis.enabled: false -> true", ...]`` for every leaf that differs."""
    if old == new:
        return []
    from deepdiff import DeepDiff  # only when something changed: it is slow to import (the no-op path skips it)

    diff = DeepDiff(old, new, view="tree", verbose_level=2)
    lines = []
    for level in sorted((lv for levels in diff.values() for lv in levels), key=lambda lv: lv.path()):
        path = _dotted(level.path(output_format="list"))
        before, after = _fmt(level.t1, path), _fmt(level.t2, path)
        if is_secret(path):  # a section's credentials are redacted inside it by _fmt
            before, after = (_hide(level.t1, before), _hide(level.t2, after))
        lines.append(f"{path}: {before} -> {after}")
    return lines
