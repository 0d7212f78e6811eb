"""The state Secret's entries, encoded and decoded without the Kubernetes client (the hook's fast path reads them
from shell-operator's snapshot)."""

from __future__ import annotations

import base64
import json
from typing import Any

from installer.records import Record
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


class StateUnreadable(RuntimeError):
    """The state Secret holds an entry that cannot be decoded."""


class StateTooNew(StateUnreadable):
    """The state Secret was written by a newer installer in a format this one does not know: a downgrade."""


def encode(value: Any) -> str:
    return base64.b64encode(json.dumps(value, sort_keys=True).encode()).decode()


def decode(value: str) -> Any:
    return json.loads(base64.b64decode(value, validate=True))


def format_of(data: dict[str, str], ref: str) -> int:
    """The format of a Secret's ``data``; StateTooNew when it is newer than this installer's."""
    if FORMAT_KEY not in data:
        return 1
    try:
        found = decode(data[FORMAT_KEY])
        writer = decode(data[WRITER_KEY]) if WRITER_KEY in data else "unknown"
    except ValueError as exc:
        raise StateUnreadable(f"{ref}, key {FORMAT_KEY!r}: {type(exc).__name__}: {exc}") from None
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise StateUnreadable(f"{ref}, key {FORMAT_KEY!r}: not a format number: {found!r}")
    if found > FORMAT:
        raise StateTooNew(f"{ref} was written by ks-installer {writer} in state format {found}; this installer "
                          f"({INSTALLER_VERSION}) reads formats up to {FORMAT}: a downgrade is refused, nothing was "
                          f"run or uninstalled. Run ks-installer {writer} (or newer) again")
    return found


def upgraded(data: dict[str, str], ref: str) -> dict[str, Any]:
    """A Secret's ``data`` decoded and upgraded to this installer's format."""
    entries: dict[str, Any] = {}
    found = format_of(data, ref)
    for key, value in data.items():
        try:
            entries[key] = decode(value)
        except ValueError as exc:
            raise StateUnreadable(f"{ref}, key {key!r}: {type(exc).__name__}: {exc}") from None
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
                records[key] = Record.from_dict(decoded)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StateUnreadable(f"{ref}, key {key!r}: {type(exc).__name__}: {exc}") from None
    return records, spec
