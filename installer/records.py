"""What the installer's state remembers per module: its last successful run (:class:`Record`) and any run since
(:class:`Intent`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        intent = data.get("intent")
        return cls(data["module"], data.get("hash"), dict(data.get("inputs") or {}), data.get("applied_at", ""),
                   data.get("version", ""), tuple(tuple(ref) for ref in data.get("inventory") or ()),  # type: ignore[misc]
                   Intent(**intent) if intent else None)
