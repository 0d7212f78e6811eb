"""What the installer's state remembers per module: its last successful run (:class:`Record`) and any run since
(:class:`Intent`)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass
from dataclasses import field as dc_field
from typing import Any

ACTIONS = ("install", "upgrade", "uninstall")
_TOKEN_LIMIT = 253
_TOKEN = re.compile(r"[\x21-\x7e]{1,128}")
"""A hash or a version: printable, no spaces."""
OUTCOMES = ("running", "failed", "interrupted")


@dataclass(frozen=True)
class Intent:
    """A run that started: written before the playbook, cleared by its success. While one is open, the
    module may be half-applied."""

    action: str
    hash: str | None
    started_at: str
    outcome: str = "running"
    """``running`` (or the process died), ``failed`` or ``interrupted``."""


@dataclass(frozen=True)
class Record:
    """What the store remembers about a module: its last successful run and any run since."""

    module: str
    hash: str | None
    """The hash of the last successful install or upgrade (``None``: never completed)."""
    inputs: dict[str, Any]
    applied_at: str = ""
    version: str = ""
    inventory: tuple[tuple[str, str, str, str], ...] = ()
    """(apiVersion, kind, namespace, name) of every object the last successful run applied."""
    intent: Intent | None = None
    objects: dict[str, tuple[str, str]] = dc_field(default_factory=dict)
    """:func:`object_key` of an inventory entry → (its UID, the guard digest of the installer's fields on it) as the
    API server returned them to the installer's last write: what the installer owns and what it left there."""

    @property
    def installed(self) -> bool:
        return self.hash is not None

    @property
    def complete(self) -> bool:
        """Installed by a run that finished: no later run of it is open."""
        return self.installed and self.intent is None

    def current_at(self, wanted: str | None) -> bool:
        """Complete, at the hash the spec asks for now."""
        return self.complete and self.hash == wanted

    def to_dict(self) -> dict[str, Any]:
        """The stored form. ``objects`` is stored as a list of [apiVersion, kind, namespace, name, uid, guard]: no
        object's name becomes a key (shell-operator's snapshot filter withholds a record with a credential-like key,
        installer.hook.STATE_JQ)."""
        data = asdict(self)
        data["objects"] = [[*key.split("|"), uid, guard] for key, (uid, guard) in sorted(self.objects.items())]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Record:
        """A record from its stored form, every field type-checked: TypeError or ValueError names the first field
        that is not what this installer writes (a state edited by hand or forged is refused, never half-used)."""
        _fields(data, "record", ("module", "hash", "inputs", "applied_at", "version", "inventory", "intent",
                                 "objects"))
        module = _str(data, "module", required=True)
        if not module:
            raise ValueError("module: must not be empty")
        inputs = data.get("inputs", {})
        if not isinstance(inputs, dict) or not all(isinstance(k, str) for k in inputs):
            raise TypeError(f"inputs: expected an object with string keys, got {_kind(inputs)}")
        inventory = data.get("inventory", [])
        if not isinstance(inventory, list):
            raise TypeError(f"inventory: expected a list, got {_kind(inventory)}")
        for i, ref in enumerate(inventory):
            if not (isinstance(ref, list) and len(ref) == 4 and all(isinstance(p, str) for p in ref)
                    and ref[0] and ref[1] and ref[3]):
                raise TypeError(f"inventory[{i}]: expected [apiVersion, kind, namespace, name] (strings), got "
                                f"{_kind(ref)}")
            if not all(_printable_token(part, _TOKEN_LIMIT) for part in ref):
                raise ValueError(f"inventory[{i}]: not an apiVersion, kind, namespace and name of Kubernetes")
        intent = data.get("intent")
        if intent is not None:
            _fields(intent, "intent", ("action", "hash", "started_at", "outcome"))
            if intent.get("action") not in ACTIONS:
                raise ValueError(f"intent.action: must be one of {', '.join(ACTIONS)}")
            if intent.get("outcome", "running") not in OUTCOMES:
                raise ValueError(f"intent.outcome: must be one of {', '.join(OUTCOMES)}")
            _str(intent, "hash", nullable=True, label="intent.hash")
            _timestamp(intent, "started_at", "intent.started_at", required=True)
        for field, value in (("hash", data.get("hash")), ("version", data.get("version")),
                             ("intent.hash", (intent or {}).get("hash"))):
            if value not in (None, "") and not (isinstance(value, str) and _TOKEN.fullmatch(value)):
                raise ValueError(f"{field}: not a hash or version (printable, no spaces, at most 128 characters)")
        if not _printable_token(module, 63):
            raise ValueError("module: not a module name")
        return cls(module, _str(data, "hash", nullable=True), dict(inputs), _timestamp(data, "applied_at"),
                   _str(data, "version") or "", tuple(tuple(ref) for ref in inventory),  # type: ignore[misc]
                   Intent(**intent) if intent is not None else None, _objects(data.get("objects", [])))


_UID = re.compile(r"[0-9a-f-]{1,64}")
_DIGEST = re.compile(r"[0-9a-f]{32}")


def object_key(ref: tuple[str, ...] | list[str]) -> str:
    """The key of an inventory entry in :attr:`Record.objects` (``|`` stands in no apiVersion, kind or name)."""
    return "|".join(ref[:4])


def _objects(data: Any) -> dict[str, tuple[str, str]]:
    """:attr:`Record.objects` from its stored form (:meth:`Record.to_dict`), type-checked."""
    if not isinstance(data, list):
        raise TypeError(f"objects: expected an array, got {_kind(data)}")
    out: dict[str, tuple[str, str]] = {}
    for i, entry in enumerate(data):
        if not (isinstance(entry, list) and len(entry) == 6 and all(isinstance(part, str) for part in entry)):
            raise ValueError(f"objects[{i}]: expected [apiVersion, kind, namespace, name, uid, guard digest]")
        ref, uid, guard = entry[:4], entry[4], entry[5]
        if any("|" in part or not _printable_token(part, _TOKEN_LIMIT) for part in ref if part):
            raise ValueError(f"objects[{i}]: not an apiVersion, kind, namespace and name")
        if not (_UID.fullmatch(uid) and _DIGEST.fullmatch(guard)):
            raise ValueError(f"objects[{i}]: expected a UID and a guard digest")
        out[object_key(ref)] = (uid, guard)
    return out


def _printable_token(text: str, limit: int) -> bool:
    """At most ``limit`` characters, printable, no whitespace: what a Kubernetes name, kind or apiVersion may hold
    (``system:kubesphere-...``), nothing a log line could be forged with."""
    return len(text) <= limit and text.isprintable() and not any(c.isspace() for c in text)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _fields(data: Any, what: str, known: tuple[str, ...]) -> None:
    if not isinstance(data, dict):
        raise TypeError(f"{what}: expected an object, got {_kind(data)}")
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise ValueError(f"{what}: unknown field {unknown[0][:40]!r}")


def _str(data: dict[str, Any], key: str, required: bool = False, nullable: bool = False, label: str = "") -> Any:
    if key not in data:
        if required:
            raise ValueError(f"{label or key}: missing")
        return None
    value = data[key]
    if not (isinstance(value, str) or (nullable and value is None)):
        raise TypeError(f"{label or key}: expected a string{' or null' if nullable else ''}, got {_kind(value)}")
    return value


def _timestamp(data: dict[str, Any], key: str, label: str = "", required: bool = False) -> str:
    """An RFC 3339 time (``""`` when absent and not required)."""
    value = _str(data, key, required=required, label=label)
    if value in (None, "") and not required:
        return ""
    try:
        dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{label or key}: not an RFC 3339 time") from None
    return str(value)
