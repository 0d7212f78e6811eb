"""The state Secret's entries, encoded and decoded without the Kubernetes client (the hook's fast path reads them
from shell-operator's snapshot)."""

from __future__ import annotations

import base64
import json
from typing import Any

from installer.records import Record

SPEC_KEY = "_spec"
"""The last spec that passed validation (the baseline for forbidden-transition checks)."""


class StateUnreadable(RuntimeError):
    """The state Secret holds an entry that cannot be decoded."""


def encode(value: Any) -> str:
    return base64.b64encode(json.dumps(value, sort_keys=True).encode()).decode()


def decode(value: str) -> Any:
    return json.loads(base64.b64decode(value, validate=True))


def parse(data: dict[str, str], ref: str) -> tuple[dict[str, Record], dict[str, Any] | None]:
    """Module records and the last accepted spec of a Secret's ``data``; StateUnreadable names the first bad
    entry."""
    records: dict[str, Record] = {}
    spec = None
    for key, value in data.items():
        try:
            decoded = decode(value)
            if key == SPEC_KEY:
                if not isinstance(decoded, dict):
                    raise TypeError(f"expected an object, got {type(decoded).__name__}")
                spec = decoded
            elif not key.startswith("_"):
                records[key] = Record.from_dict(decoded)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StateUnreadable(f"{ref}, key {key!r}: {type(exc).__name__}: {exc}") from None
    return records, spec
