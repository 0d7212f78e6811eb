"""A spec's shape before anything walks it: bounded nesting, size and strings, JSON data only
(:func:`structure_errors`), and the error it reports (:class:`SpecError`). Without the schema or PyYAML: the state
snapshot's check on the hook's cheap path uses it too."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from installer.json_bounded import MAX_DEPTH

_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_KEY_SHOWN = 64
MAX_PATH_SHOWN = 200
MAX_MESSAGE_SHOWN = 400


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class SpecError:
    """One problem in the spec: ``path`` is dotted (``common.gpu.kinds[0].resourceName``). Both are cut to a bounded
    length (a 4 MB key is named by its first characters)."""

    path: str
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _cut(self.path, MAX_PATH_SHOWN))
        object.__setattr__(self, "message", _cut(self.message, MAX_MESSAGE_SHOWN))

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


#: Bounds on what the installer accepts at all, checked before anything else walks the spec (MAX_DEPTH and
#: PARSE_DEPTH: installer.json_bounded).
MAX_NODES = 20_000
MAX_STRING = 8_192
_SHOWN_PARTS = 8


def format_path(parts: Iterable[Any]) -> str:
    """``["common", "gpu", "kinds", 0, "resourceName"]`` -> ``common.gpu.kinds[0].resourceName``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and _SIMPLE_KEY.match(part) and len(part) <= MAX_KEY_SHOWN:
            out += f".{part}" if out else part
        else:
            out += f"[{quoted_key(part)}]"
    return out


def quoted_key(key: Any) -> str:
    """A key as JSON, cut after MAX_KEY_SHOWN characters."""
    text = str(key)
    return json.dumps(text if len(text) <= MAX_KEY_SHOWN else text[:MAX_KEY_SHOWN] + "...")


def type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null",
            dict: "object", list: "list"}.get(type(value), type(value).__name__)


def depth_error(parts: list[Any]) -> SpecError:
    """The error for a value nested deeper than MAX_DEPTH at ``parts``, its path cut after a few levels."""
    shown = format_path(parts[:_SHOWN_PARTS]) + ("..." if len(parts) > _SHOWN_PARTS else "")
    return SpecError(shown or "spec", f"is nested deeper than {MAX_DEPTH} levels")


def structure_errors(spec: Any) -> list[SpecError]:
    """Nesting deeper than MAX_DEPTH, more than MAX_NODES values, strings longer than MAX_STRING, keys that are
    not strings, and values that are not JSON (sets, dates): one error each, found without recursion (a spec
    nested a thousand deep, or a YAML alias bomb, must not exhaust the stack or the memory)."""
    errors: list[SpecError] = []
    stack: list[tuple[Any, list[Any]]] = [(spec, [])]
    seen = 0
    while stack and len(errors) < 20:
        node, parts = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            return [SpecError("spec", f"is too large: more than {MAX_NODES} values")]
        if len(parts) > MAX_DEPTH:
            errors.append(depth_error(parts))
            continue
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    errors.append(SpecError(format_path([*parts, str(key)]),
                                            f"field names must be strings; got {type_name(key)}"))
                elif len(key) > MAX_STRING:
                    errors.append(SpecError(format_path([*parts, key]), f"is too long a field name: {len(key)} "
                                            f"characters (at most {MAX_STRING})"))
                else:
                    stack.append((value, [*parts, key]))
        elif isinstance(node, list):
            stack += [(item, [*parts, i]) for i, item in enumerate(node)]
        elif isinstance(node, str) and len(node) > MAX_STRING:
            errors.append(SpecError(format_path(parts) or "spec", f"is too long: {len(node)} characters "
                                    f"(at most {MAX_STRING})"))
        elif not isinstance(node, str | int | float | bool | type(None)):
            errors.append(SpecError(format_path(parts) or "spec", f"must be JSON data; got {type_name(node)}"))
    return sorted(set(errors), key=lambda e: e.path)
