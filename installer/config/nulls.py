"""``null`` where the schema wants a scalar means unset, as in Kubernetes' API conventions (null = absent, then
defaulted). KubeKey v2.1.0-alpha.0 shipped a v3.3.0 cc with ``logging.enabled:`` and no value; such a key is
removed before validation (so the default, or the kept previous value, applies) and named in the notes."""

from __future__ import annotations

import json
from typing import Any

from installer.config.defaults import default_spec
from installer.config.secrets import is_secret
from installer.config.spec_schema import schema
from installer.config.validate import format_path

_SCALARS = {"string", "boolean", "integer", "number"}


def _resolve(node: Any) -> dict[str, Any]:
    """``node`` with its ``$ref`` (``#/$defs/<name>``) followed."""
    while isinstance(node, dict) and "$ref" in node:
        node = schema()["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node if isinstance(node, dict) else {}


def _scalar_only(node: dict[str, Any]) -> bool:
    """Whether ``node`` accepts only non-null scalars (so a null there can only mean "not set")."""
    if "anyOf" in node:
        return all(_scalar_only(_resolve(branch)) for branch in node["anyOf"])
    if "enum" in node and "type" not in node:
        return all(v is not None and not isinstance(v, dict | list) for v in node["enum"])
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    return bool(kinds) and set(kinds) <= _SCALARS


def _default_of(parts: list[Any]) -> Any:
    node: Any = default_spec()
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _note(parts: list[Any]) -> str:
    path = format_path(parts)
    default = _default_of(parts)
    if default is None or isinstance(default, dict | list) or is_secret(path):
        return f"unset {path} (null: as if absent)"
    return f"unset {path} (null: as if absent; the default {json.dumps(default)} applies)"


def unset_nulls(spec: dict[str, Any]) -> list[str]:
    """Remove, in place, every ``null`` the schema has a scalar type for; return one note per key removed."""
    notes: list[str] = []
    stack: list[tuple[Any, dict[str, Any], list[Any]]] = [(spec, schema(), [])]
    while stack:
        node, shape, parts = stack.pop()
        if isinstance(node, list):
            items = _resolve(shape.get("items"))
            stack += [(item, items, [*parts, i]) for i, item in enumerate(node)]
            continue
        props = shape.get("properties")
        if not isinstance(node, dict) or not isinstance(props, dict):
            continue
        for key in list(node):
            child = _resolve(props.get(key))
            if node[key] is None and key in props and _scalar_only(child):
                del node[key]
                notes.append(_note([*parts, key]))
            elif isinstance(node[key], dict | list):
                stack.append((node[key], child, [*parts, key]))
    return sorted(notes)
