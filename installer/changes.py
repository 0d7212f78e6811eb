"""Explain what changed between two input sets, field by field, without revealing secrets."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from installer.config.secrets import is_credential, is_secret, redact
from installer.spec import get, nested

UNSET = "<unset>"
REDACTED = "<redacted>"


def _fmt(value: Any, path: str) -> str:
    if value is UNSET:
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


def _differences(old: Any, new: Any, path: list[Any]) -> Iterator[tuple[list[Any], Any, Any]]:
    """``(path, before, after)`` of every leaf that differs (a key only on one side: ``UNSET`` on the other); lists of
    the same length are compared item by item, others as a whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys(), key=str):
            yield from _differences(old.get(key, UNSET), new.get(key, UNSET), [*path, key])
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            yield from _differences(before, after, [*path, index])
    elif type(old) is not type(new) or old != new:
        yield path, old, new


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``["common.redis.enabled: false -> true", ...]`` for every leaf that differs."""
    lines = []
    for parts, before_value, after_value in _differences(old, new, []):
        path = _dotted(parts)
        before, after = _fmt(before_value, path), _fmt(after_value, path)
        if is_secret(path):  # a section's credentials are redacted inside it by _fmt
            before, after = (_hide(before_value, before), _hide(after_value, after))
        lines.append(f"{path}: {before} -> {after}")
    return sorted(lines)
