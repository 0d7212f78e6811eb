"""Small helpers to read and write dotted paths in a ClusterConfiguration spec."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Spec = dict[str, Any]
_MISSING = object()


def get(spec: Spec, path: str, default: Any = None) -> Any:
    """Return the value at dotted ``path`` (e.g. ``common.redis.enabled``) or ``default``."""
    node: Any = spec
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def has(spec: Spec, path: str) -> bool:
    """Whether dotted ``path`` exists in ``spec``."""
    return get(spec, path, _MISSING) is not _MISSING


def under(path: str, prefix: str) -> bool:
    """Whether dotted ``path`` is ``prefix`` or lies below it (``prefix.x``, ``prefix[0]``)."""
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def nested(path: str, value: Any) -> dict[str, Any]:
    """Build ``{"a": {"b": value}}`` from ``"a.b"``."""
    out: Any = value
    for part in reversed(path.split(".")):
        out = {part: out}
    return out


def merge(base: dict[str, Any], patch: dict[str, Any]) -> None:
    """Deep-merge ``patch`` into ``base`` in place (dicts merge, everything else replaces)."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Each leaf of nested mappings with its dotted path: a value that is no mapping, or an empty one."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}" if path else key)
    else:
        yield path, value
