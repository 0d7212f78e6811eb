"""Which spec values are credentials, and how to hide them (logs, status, the last-applied mirror)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from installer.config.spec_schema import schema
from installer.spec import under

REDACTED = "<redacted>"

def _marked(node: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted paths of the schema ``node`` marked ``x-secret`` ($refs followed)."""
    if "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    if node.get("x-secret"):
        yield prefix
        return
    for key, sub in (node.get("properties") or {}).items():
        yield from _marked(sub, defs, f"{prefix}.{key}" if prefix else key)


#: Dotted spec paths whose values are credentials, or free-form sections that may hold them (all of it is one):
#: the fields the schema marks ``x-secret``.
SECRET_PATHS: tuple[str, ...] = tuple(_marked(schema(), schema().get("$defs", {})))

#: Any key ending like this is treated as a credential too (e.g. inside free-form ``oauthOptions``).
SECRET_KEY = re.compile(r"(password|secret|token)$", re.IGNORECASE)


def is_secret(path: str) -> bool:
    """Whether the value at dotted ``path`` (or anything below it) may hold a credential."""
    return is_credential(path) or any(under(s, path) for s in SECRET_PATHS)


def is_credential(path: str) -> bool:
    """Whether dotted ``path`` is itself a credential field (or lies inside one)."""
    if any(under(path, s) for s in SECRET_PATHS):
        return True
    last = re.split(r"[.\[]", path)[-1].strip('"]')
    return bool(SECRET_KEY.search(last))


def redact(spec: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``spec`` with every non-empty credential value replaced by ``"<redacted>"``."""
    out = copy.deepcopy(spec)
    _redact(out, "")
    return out


def _redact(node: Any, prefix: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if _is_secret_leaf(path, key):
                if value not in ("", None, {}, []):
                    node[key] = REDACTED
            else:
                _redact(value, path)
    elif isinstance(node, list):
        for item in node:
            _redact(item, prefix)


def _is_secret_leaf(path: str, key: Any) -> bool:
    return path in SECRET_PATHS or (isinstance(key, str) and bool(SECRET_KEY.search(key)))
