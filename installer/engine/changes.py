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


def _differences(old: Any, new: Any) -> Iterator[tuple[list[Any], Any, Any]]:
    """``(path, before, after)`` of every value that differs, by deepdiff (a key or list item only on one side:
    ``UNSET`` on the other; a list that grew or shrank reports the items added or removed). deepdiff is imported
    here, when a change is explained, so the no-op path never loads it."""
    from deepdiff import DeepDiff
    from deepdiff.helper import NotPresent

    def value(v: Any) -> Any:
        return UNSET if isinstance(v, NotPresent) else v

    for levels in DeepDiff(old, new, view="tree", verbose_level=2).values():
        for level in levels:
            yield level.path(output_format="list"), value(level.t1), value(level.t2)


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``["common.redis.enabled: false -> true", ...]`` for every leaf that differs."""
    lines = []
    for parts, before_value, after_value in _differences(old, new):
        path = _dotted(parts)
        before, after = _fmt(before_value, path), _fmt(after_value, path)
        if is_secret(path):  # a section's credentials are redacted inside it by _fmt
            before, after = (_hide(before_value, before), _hide(after_value, after))
        lines.append(f"{path}: {before} -> {after}")
    return sorted(lines)
