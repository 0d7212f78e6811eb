"""The ClusterConfiguration spec: defaults, legacy-key migration, validation and secret redaction."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from installer.config.advice import warnings
from installer.config.defaults import apply_defaults, default_spec
from installer.config.migrate import Move, log_store_from_status, migrate, migrate_notes
from installer.config.nulls import unset_nulls
from installer.config.secrets import redact
from installer.config.validate import (
    SpecError,
    bounded,
    format_errors,
    structure_errors,
    validate,
    validate_transition,
)
from installer.spec import get, has, merge, nested, under

__all__ = ["Prepared", "SpecError", "apply_defaults", "default_spec", "format_errors", "migrate", "prepare",
           "redact", "validate", "validate_transition"]


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
    warnings: list[str] = field(default_factory=list)
    """Valid, but likely not what the user meant (see installer.config.advice)."""


def prepare(raw_spec: object, previous_spec: dict[str, Any] | None = None, keep: tuple[str, ...] = (),
            applied: dict[str, Any] | None = None, status: object = None) -> Prepared:
    """Migrate, validate (the user's keys and the defaulted result) and check the transition from
    ``applied`` (what the installed modules were installed with; default ``previous_spec``). Each ``keep``
    path the cc lacks takes its value from ``previous_spec`` (the last accepted spec) instead of the default:
    a missing section is no instruction to uninstall; a ``null`` where the schema wants a scalar counts as missing
    (installer.config.nulls). ``spec`` is the defaulted spec; act on it only if
    ``errors`` is empty. An error under a path a migration moved names the path the user wrote, and a legacy
    value a migration dropped (its new key is already set) is validated all the same. ``status`` (the cc's)
    decides the log store of a cc that names none (installer.config.migrate.log_store_from_status)."""
    if not isinstance(raw_spec, dict):
        kind = "null" if raw_spec is None else type(raw_spec).__name__
        return Prepared({}, [], [SpecError("spec", f"must be an object (mapping); got {kind}")])
    if shape := structure_errors(raw_spec):  # before anything else walks it
        return Prepared({}, [], shape)
    migrated, notes = migrate_notes(raw_spec)
    if note := log_store_from_status(migrated, status):
        notes.append(note)
    notes += unset_nulls(migrated)  # null where a scalar belongs: unset, then defaulted (or kept)
    moves = [note for note in notes if isinstance(note, Move)]
    errors = validate(migrated)
    kept = {p: get(previous_spec, p) for p in keep
            if previous_spec is not None and has(previous_spec, p) and not has(migrated, p)}
    with_kept = copy.deepcopy(migrated)
    for path, value in kept.items():
        merge(with_kept, nested(path, value))
    spec = apply_defaults(with_kept)
    plain = apply_defaults(migrated) if kept else None
    errors += [e for e in validate(spec) if e not in errors]
    errors += validate_transition(previous_spec if applied is None else applied, spec)
    errors = bounded([_as_written(e, moves) for e in errors] + _dropped_errors(raw_spec, moves, errors))
    kept = {p: v for p, v in kept.items() if get(plain, p) != v}
    advice = warnings(spec, status) if not errors else []
    return Prepared(spec, [str(note) for note in notes], errors, kept, plain, advice)


def _as_written(error: SpecError, moves: list[Move]) -> SpecError:
    """``error`` under the legacy path the user wrote, when a migration moved its value there:
    ``console.port (moved to common.core.console.port): must be ...``."""
    for move in moves:
        if move.kind == "moved" and under(error.path, move.dst):
            return SpecError(f"{move.src}{error.path[len(move.dst):]} (moved to {error.path})", error.message)
    return error


def _dropped_errors(raw_spec: dict[str, Any], moves: list[Move], errors: list[SpecError]) -> list[SpecError]:
    """What is wrong with the legacy values a migration dropped because their new key is already set: each is
    validated at its new key, alone over the defaults, and named where the user wrote it. (A value that did move
    is validated where it landed and named by ``_as_written``.)"""
    landed = {e.path for e in errors}
    out: list[SpecError] = []
    for move in moves:
        if move.kind != "dropped" or not has(raw_spec, move.src):
            continue
        alone = nested(move.src, copy.deepcopy(get(raw_spec, move.src)))
        move.step(alone)
        for error in validate(apply_defaults(alone)):
            if under(error.path, move.dst) and error.path not in landed:
                out.append(SpecError(f"{move.src}{error.path[len(move.dst):]} (dropped: {error.path} is already "
                                     "set)", error.message))
    return out
