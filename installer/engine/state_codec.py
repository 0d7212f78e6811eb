"""The state Secret's entries, encoded and decoded without the Kubernetes client (the hook's fast path reads them
from shell-operator's snapshot)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from installer.engine.records import Record
from installer.json_bounded import loads_json
from installer.spec_structure import structure_errors
from installer.version import INSTALLER_VERSION

SPEC_KEY = "_spec"
"""The last spec that passed validation (the baseline for forbidden-transition checks)."""
FORMAT_KEY = "_format"
"""The format of the entries; a Secret without it is format 1."""
WRITER_KEY = "_writer"
"""The version of the installer that last wrote the Secret's format."""
FORMAT = 2
"""The format this installer writes. 1 → 2: the format and writer keys (the entries are unchanged). A later format
that changes entries adds a step to :data:`UPGRADES`."""
UPGRADES: dict[int, Any] = {1: lambda entries: entries}
"""``format → function`` turning the decoded entries of that format into the next one's."""
MAX_ENTRY = 1 << 20
"""Characters of one encoded entry (the API server keeps a whole Secret under 1 MiB)."""


class StateUnreadable(RuntimeError):
    """The state Secret holds an entry that cannot be decoded."""


class StateTooNew(StateUnreadable):
    """The state Secret was written by a newer installer in a format this one does not know: a downgrade."""


def encode(value: Any) -> str:
    return base64.b64encode(json.dumps(value, sort_keys=True).encode()).decode()


def data_digest(data: dict[str, str]) -> str:
    """A digest of a state Secret's ``data`` (its base64 values as the API returns them): the hook's fast path,
    which writes the Secret through shell-operator and cannot learn the resourceVersion it gets, records this."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def decode(value: Any) -> Any:
    """One entry, read with the spec's bounds (installer.config.validate): ValueError when it is not base64 JSON,
    is too large, nested deeper than MAX_DEPTH, holds more than MAX_NODES values or too long a string (never a
    RecursionError or a MemoryError, whatever the Secret holds)."""
    if not isinstance(value, str):
        raise ValueError(f"expected base64 text, got {type(value).__name__}")
    if len(value) > MAX_ENTRY:
        raise ValueError(f"too large: {len(value)} characters (at most {MAX_ENTRY})")
    try:
        decoded = loads_json(base64.b64decode(value, validate=True))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start})") from None
    if errors := structure_errors(decoded):
        raise ValueError(str(errors[0]))
    return decoded


def format_of(data: dict[str, str], ref: str) -> int:
    """The format of a Secret's ``data``; StateTooNew when it is newer than this installer's."""
    if FORMAT_KEY not in data:
        return 1
    try:
        found = decode(data[FORMAT_KEY])
    except ValueError as exc:
        raise StateUnreadable(f"{ref}, key {FORMAT_KEY!r}: {type(exc).__name__}: {exc}") from None
    writer = writer_of(data)
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise StateUnreadable(f"{ref}, key {FORMAT_KEY!r}: not a format number: {found!r}")
    if found > FORMAT:
        raise StateTooNew(f"{ref} was written by ks-installer {writer} in state format {found}; this installer "
                          f"({INSTALLER_VERSION}) reads formats up to {FORMAT}: a downgrade is refused, nothing was "
                          f"run or uninstalled. Run ks-installer {writer} (or newer) again")
    return found


def writer_of(data: dict[str, str]) -> str:
    """The installer version in ``_writer``, as it may be printed: at most 40 printable characters, else
    ``"unknown"`` (the key is written by whoever can write the Secret)."""
    try:
        writer = decode(data[WRITER_KEY]) if WRITER_KEY in data else "unknown"
    except ValueError:
        return "unknown"
    if not isinstance(writer, str) or not writer or len(writer) > 40 or not writer.isprintable():
        return "unknown" if not isinstance(writer, str) else json.dumps(writer[:40])
    return writer


def upgraded(data: dict[str, str], ref: str) -> dict[str, Any]:
    """A Secret's ``data`` decoded and upgraded to this installer's format."""
    entries: dict[str, Any] = {}
    found = format_of(data, ref)
    for key, value in data.items():
        try:
            entries[key] = decode(value)
        except ValueError as exc:
            raise StateUnreadable(f"{ref}, key {shown_key(key)}: {type(exc).__name__}: {exc}") from None
    for step in range(found, FORMAT):
        entries = UPGRADES[step](entries)
    return entries


def parse(data: dict[str, str], ref: str) -> tuple[dict[str, Record], dict[str, Any] | None]:
    """Module records and the last accepted spec of a Secret's ``data``, upgraded to this installer's format;
    StateUnreadable names the first bad entry, StateTooNew refuses a newer installer's state."""
    return records_of(upgraded(data, ref), ref)


def records_of(entries: dict[str, Any], ref: str) -> tuple[dict[str, Record], dict[str, Any] | None]:
    """Module records and the last accepted spec of decoded, upgraded entries (:func:`upgraded`)."""
    records: dict[str, Record] = {}
    spec = None
    for key, decoded in entries.items():
        try:
            if key == SPEC_KEY:
                if not isinstance(decoded, dict):
                    raise TypeError(f"expected an object, got {type(decoded).__name__}")
                spec = decoded
            elif not key.startswith("_"):
                record = Record.from_dict(decoded)
                if record.module != key:
                    raise ValueError(f"module: {record.module[:60]!r} is not the entry's key")
                records[key] = record
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StateUnreadable(f"{ref}, key {shown_key(key)}: {type(exc).__name__}: {exc}") from None
    return records, spec


def shown_key(key: str) -> str:
    """A Secret key as a message shows it (keys are ``[-._a-zA-Z0-9]+``, at most 253: quoted and cut)."""
    return repr(key if len(key) <= 63 else key[:60] + "...")
