"""A yes/no check of a value against ``schema.yaml``, without the jsonschema package.

Importing jsonschema costs more than the rest of a no-op hook run (its validators, ``referencing`` and their attrs
classes: about 50 ms of CPU), and a spec is valid on nearly every run. :func:`conforms` answers for the keywords the
schema uses, with installer.config.validate's rules (``pattern`` matches the whole string; an integer is no boolean
and no float; a number is finite); installer.config.validate asks jsonschema only when it says no, for the
messages. It never says yes where jsonschema would find an error: a keyword it does not know, or an ``enum`` value
of another type than the value, is a no.
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "x-secret"})
"""Keywords that say nothing about validity."""
TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
}


def conforms(value: Any, schema: dict[str, Any]) -> bool:
    """Whether ``value`` is valid against ``schema`` (a root schema: its ``$ref`` point into its ``$defs``);
    False also when unsure."""
    return _conforms(value, schema, schema)


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _ref(root: dict[str, Any], ref: str) -> dict[str, Any] | None:
    prefix = "#/$defs/"
    return (root.get("$defs") or {}).get(ref[len(prefix):]) if ref.startswith(prefix) else None


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _conforms(value: Any, schema: Any, root: dict[str, Any]) -> bool:
    if schema is True:
        return True
    if not isinstance(schema, dict):
        return False
    number = TYPES["number"](value)
    for keyword, arg in schema.items():
        if keyword in ANNOTATIONS:
            continue
        if keyword == "$ref":
            target = _ref(root, arg)
            ok = target is not None and _conforms(value, target, root)
        elif keyword == "type":
            ok = any(t in TYPES and TYPES[t](value) for t in ([arg] if isinstance(arg, str) else arg))
        elif keyword == "enum":
            ok = any(_same(value, choice) for choice in arg)
        elif keyword == "pattern":
            ok = not isinstance(value, str) or _pattern(arg).fullmatch(value) is not None
        elif keyword == "maxLength":
            ok = not isinstance(value, str) or len(value) <= arg
        elif keyword == "minimum":
            ok = not number or value >= arg
        elif keyword == "maximum":
            ok = not number or value <= arg
        elif keyword == "anyOf":
            ok = any(_conforms(value, option, root) for option in arg)
        elif keyword == "items":
            ok = not isinstance(value, list) or all(_conforms(item, arg, root) for item in value)
        elif keyword == "required":
            ok = not isinstance(value, dict) or all(name in value for name in arg)
        elif keyword == "propertyNames":
            ok = not isinstance(value, dict) or all(_conforms(key, arg, root) for key in value)
        elif keyword == "properties":
            ok = not isinstance(value, dict) or all(
                _conforms(value[key], sub, root) for key, sub in arg.items() if key in value)
        elif keyword == "additionalProperties":
            known = schema.get("properties") or {}
            ok = not isinstance(value, dict) or all(
                arg is not False and _conforms(item, arg, root) for key, item in value.items() if key not in known)
        else:
            return False  # a keyword this check does not know: jsonschema decides
        if not ok:
            return False
    return True
