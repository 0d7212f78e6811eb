"""The ClusterConfiguration spec: defaults, legacy-key migration, validation and secret redaction."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from installer.config.defaults import apply_defaults, default_spec
from installer.config.migrate import migrate
from installer.config.secrets import redact
from installer.config.validate import SpecError, structure_errors, validate, validate_transition
from installer.spec import get, has, merge, nested

__all__ = ["Prepared", "SpecError", "apply_defaults", "default_spec", "migrate", "prepare", "redact",
           "validate", "validate_transition"]


@dataclass(frozen=True)
class Prepared:
    """A spec ready to plan with: migrated and defaulted, plus what was migrated and what is wrong."""

    spec: dict[str, Any]
    migrations: list[str] = field(default_factory=list)
    errors: list[SpecError] = field(default_factory=list)
    kept: dict[str, Any] = field(default_factory=dict)
    """Paths the cc lacks that kept their previous value (see ``prepare``'s ``keep``)."""
    plain: dict[str, Any] | None = None
    """The defaulted spec without the kept values (``None`` when nothing was kept)."""


def prepare(raw_spec: object, previous_spec: dict[str, Any] | None = None, keep: tuple[str, ...] = ()) -> Prepared:
    """Migrate, validate (the user's keys and the defaulted result) and check the transition from
    ``previous_spec`` (the last applied spec). Each ``keep`` path the cc lacks takes its value from
    ``previous_spec`` instead of the default: a missing section is no instruction to uninstall.
    ``spec`` is the defaulted spec; act on it only if ``errors`` is empty."""
    if not isinstance(raw_spec, dict):
        kind = "null" if raw_spec is None else type(raw_spec).__name__
        return Prepared({}, [], [SpecError("spec", f"must be an object (mapping); got {kind}")])
    if shape := structure_errors(raw_spec):  # before anything else walks it
        return Prepared({}, [], shape)
    migrated, migrations = migrate(raw_spec)
    errors = validate(migrated)
    kept = {p: get(previous_spec, p) for p in keep
            if previous_spec is not None and has(previous_spec, p) and not has(migrated, p)}
    with_kept = copy.deepcopy(migrated)
    for path, value in kept.items():
        merge(with_kept, nested(path, value))
    spec = apply_defaults(with_kept)
    plain = apply_defaults(migrated) if kept else None
    errors += [e for e in validate(spec) if e not in errors]
    errors += validate_transition(previous_spec, spec)
    return Prepared(spec, migrations, errors, {p: v for p, v in kept.items() if get(plain, p) != v}, plain)
