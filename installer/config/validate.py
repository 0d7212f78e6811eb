"""Validate a spec against ``schema.yaml``, forbid Jinja anywhere, and check role transitions.

Messages name the field, what it must be and (for non-secret scalars) the offending value::

    multicluster.clusterRole: must be one of "host", "member", "none"; got "hub"
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from installer.config.accepted_specs import accepted_before, remember
from installer.config.secrets import is_credential, is_secret
from installer.config.spec_schema import schema
from installer.json_bounded import PARSE_DEPTH as PARSE_DEPTH  # read from here by the engine, the cli and tests
from installer.json_bounded import loads_json as loads_json
from installer.spec_structure import (
    MAX_KEY_SHOWN,
    MAX_NODES,
    MAX_STRING,
    SpecError,
    format_path,
    quoted_key,
    structure_errors,
    type_name,
)

# Read from here by the engine, the cli and tests.
__all__ = ["MAX_NODES", "MAX_STRING", "PARSE_DEPTH", "SpecError", "format_path", "loads_json", "structure_errors"]

if TYPE_CHECKING:
    from jsonschema import ValidationError

JINJA_DELIMITERS = ("{{", "{%", "{#")
_MAX_SHOWN = 60


MAX_ERRORS = 50
"""Errors a refusal lists (then how many more): what is printed, logged and written to status stays small."""


def format_errors(errors: Iterable[SpecError]) -> str:
    """One indented ``path: message`` line per error, as the CLI and the log list them."""
    return "\n".join(f"  {error}" for error in errors)


def bounded(errors: list[SpecError]) -> list[SpecError]:
    """The first MAX_ERRORS errors, and a last one saying how many more there are."""
    if len(errors) <= MAX_ERRORS:
        return errors
    return [*errors[:MAX_ERRORS], SpecError("spec", f"... and {len(errors) - MAX_ERRORS} more errors")]


def _full_pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """``pattern`` must match the whole string (``$`` alone would accept a trailing newline)."""
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not re.fullmatch(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _is_integer(_: Any, instance: Any) -> bool:
    """Integers are integers: not booleans, and not floats such as 30880.0 (the API server refuses those)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(_: Any, instance: Any) -> bool:
    """A finite int or float (no NaN, no infinity)."""
    return isinstance(instance, int | float) and not isinstance(instance, bool) and math.isfinite(instance)


@cache
def _validator() -> Any:
    """jsonschema's validator of the schema, with this module's rules (imported only when a spec has errors)."""
    from jsonschema import Draft202012Validator, validators

    types = Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
    return validators.extend(Draft202012Validator, {"pattern": _full_pattern}, type_checker=types)(schema())


def _shown(value: Any, path: str) -> str | None:
    """A scalar as it appears in a message; ``None`` for secrets and whole objects/lists."""
    if is_secret(path) or isinstance(value, dict | list):
        return None
    text = json.dumps(value, ensure_ascii=False, default=str)
    text = "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)  # no bidi or terminal controls
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 4] + '..."'


def _got(value: Any, path: str, with_type: bool) -> str:
    if value is None:
        return "; got null"
    shown = _shown(value, path)
    if shown is None:
        hidden = is_credential(path)  # a section holding credentials is not one: its value is just not shown
        return f"; got {type_name(value)}" + (" (value hidden: secret field)" if hidden else "")
    return f"; got {type_name(value)} {shown}" if with_type else f"; got {shown}"


def _choices(values: Iterable[Any]) -> str:
    return ", ".join(json.dumps(v) for v in values)


def _unknown_fields(err: ValidationError, path: list[Any]) -> Iterator[SpecError]:
    import difflib

    known = list(err.schema.get("properties", {}))
    by_lower = {k.lower(): k for k in known}
    for key in err.instance:
        if key in known:
            continue
        where = format_path([*path, key])
        close = difflib.get_close_matches(str(key)[:MAX_KEY_SHOWN].lower(), list(by_lower), n=1, cutoff=0.6)
        hint = f'; did you mean "{by_lower[close[0]]}"?' if close else ""
        if not hint and len(known) <= 12:
            hint = f"; known fields: {', '.join(known)}"
        section = f" in {format_path(path)}" if path else ""
        yield SpecError(where, f"unknown field {quoted_key(key)}{section}{hint}")


def _message(err: ValidationError, path: str) -> str:
    schema, value, kind = err.schema, err.instance, err.validator
    got = _got(value, path, with_type=kind == "type")
    if kind == "enum":
        return f"must be one of {_choices(err.validator_value)}{got}"
    if kind == "type" and "enum" in schema:
        return f"must be one of {_choices(schema['enum'])}{got}"
    if "title" in schema:
        return f"must be {schema['title']}{got}"
    if kind == "type":
        expected = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        return f"expected {'a boolean (true or false)' if expected == 'boolean' else expected}{got}"
    if kind == "minimum":
        return f"must be >= {err.validator_value}{got}"
    if kind == "maximum":
        return f"must be <= {err.validator_value}{got}"
    return f"is invalid ({kind}){got}"


def _schema_errors(spec: dict[str, Any]) -> Iterator[SpecError]:
    if accepted_before(spec, schema()):  # the spec of nearly every run (installer.config.accepted_specs)
        return
    valid = True
    for err in _validator().iter_errors(spec):
        valid = False
        parts = list(err.absolute_path)
        if err.validator == "additionalProperties":
            yield from _unknown_fields(err, parts)
        elif err.validator == "required":
            for name in err.validator_value:
                if isinstance(err.instance, dict) and name not in err.instance:
                    yield SpecError(format_path([*parts, name]), "missing required field")
        else:
            path = format_path(parts) or "spec"
            yield SpecError(path, _message(err, path))
    if valid:
        remember(spec, schema())


def _has_jinja(text: str) -> bool:
    return any(d in text for d in JINJA_DELIMITERS)


def _jinja_errors(node: Any, parts: list[Any]) -> Iterator[SpecError]:
    """Every string (value or key) holding ``{{``, ``{%`` or ``{#``: Ansible would template it."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and _has_jinja(key):
                yield SpecError(format_path([*parts, key]), "field names must not contain Jinja delimiters")
            yield from _jinja_errors(value, [*parts, key])
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _jinja_errors(item, [*parts, i])
    elif isinstance(node, str) and _has_jinja(node):
        yield SpecError(format_path(parts) or "spec",
                        "must not contain Jinja delimiters ({{, {% or {#): spec values become Ansible variables")


def validate(spec: dict[str, Any]) -> list[SpecError]:
    """Every problem in ``spec``, sorted by path. An empty list means valid."""
    if not isinstance(spec, dict):
        return [SpecError("spec", f"must be an object (mapping); got {type_name(spec)}")]
    by_path = {e.path: e for e in _jinja_errors(spec, [])}
    for err in (*_schema_errors(spec), *_rule_errors(spec)):
        by_path.setdefault(err.path, err)  # one error per field: Jinja first, then the first schema error
    return sorted(by_path.values(), key=lambda e: e.path)


def _rule_errors(spec: dict[str, Any]) -> Iterator[SpecError]:
    """Rules across fields that the schema cannot say."""
    auth = spec.get("authentication")
    if _role(spec) == "member" and not (auth.get("jwtSecret") if isinstance(auth, dict) else None):
        yield SpecError("authentication.jwtSecret",
                        "must be the host cluster's jwtSecret on a member cluster (its tokens are verified here "
                        "with that key); on the host: kubectl -n kubesphere-system get cm kubesphere-config -o yaml "
                        "| grep jwtSecret")


#: clusterRole changes the installer cannot carry out in place (upstream kubesphere#4229).
#: Role changes refused whatever the cluster holds; host -> none/member is refused only while member clusters are
#: joined (installer.engine.member_clusters, which needs the cluster).
_FORBIDDEN_ROLE_CHANGES = {
    ("member", "host"): "a member cluster cannot be promoted to host in place",
}


def _role(spec: dict[str, Any] | None) -> Any:
    multicluster = spec.get("multicluster") if isinstance(spec, dict) else None
    return multicluster.get("clusterRole", "none") if isinstance(multicluster, dict) else "none"


def validate_transition(previous: dict[str, Any] | None, current: dict[str, Any]) -> list[SpecError]:
    """Changes from the last applied spec that are not allowed (``multicluster.clusterRole``)."""
    if previous is None:
        return []
    before, after = _role(previous), _role(current)
    why = _FORBIDDEN_ROLE_CHANGES.get((before, after)) if isinstance(before, str) and isinstance(after, str) else None
    if why is None:
        return []
    return [SpecError("multicluster.clusterRole",
                      f"cannot change from {json.dumps(before)} to {json.dumps(after)}: {why} "
                      f"(upstream kubesphere/kubesphere#4229); set it back to {json.dumps(before)}, "
                      "or remove KubeSphere (`python -m installer uninstall --all` in the ks-installer pod) and "
                      "reinstall with the new role")]
