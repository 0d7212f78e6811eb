"""What an apply, prune or uninstall did (:class:`ApplyResult`) and, in a dry run, what it would do to each
object (:class:`Change`): the change set a preview prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from installer.objects.inventory import append_entry
from installer.objects.refs import Obj, Ref


@dataclass
class Change:
    """What a run does to one object, as a dry run finds it (one entry of :attr:`ApplyResult.changes`)."""

    ref: str
    """``Kind/namespace/name``."""
    action: str
    """create, update, unchanged, adopt (the original installer's, taken over), recreate, delete, kept, roll or
    error."""
    fields: list[str] = field(default_factory=list)
    """What the decision itself says changes beyond the dry-run result (a takeover's or an eviction's removed fields,
    a selector; a generator's keys)."""
    note: str = ""
    body: Obj | None = None
    """What the run applies (labelled, its digest annotated), for a preview's manifests."""
    live: Obj | None = None
    """The object as it is, when the run changes it."""
    after: Obj | None = None
    """The dry-run apply's result (what the object becomes)."""


@dataclass
class ApplyResult:
    applied: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    """Objects the original installer made whose fields this apply took over (installer.engine.adoption)."""
    immutable: list[str] = field(default_factory=list)
    """``Kind/ns/name: what was done``, for objects whose unchangeable fields differed (:meth:`Manifests._replace`)."""
    applied_refs: list[Ref] = field(default_factory=list)
    deleted_refs: list[Ref] = field(default_factory=list)
    spared: list[str] = field(default_factory=list)
    """Objects with the module's label that prune or uninstall left, and why (installer.objects.ownership)."""
    foreign: list[str] = field(default_factory=list)
    """``Kind/ns/name: removed fields of manager X: ...`` and planted ServiceAccounts recreated
    (installer.objects.foreign)."""
    actions: dict[str, str] = field(default_factory=dict)
    """``Kind/ns/name`` → what the apply did to it: its :class:`installer.objects.change_set.Decision`'s action (the
    same change set a preview shows), ``recreate`` or ``kept`` where a field that cannot change made it so."""
    changes: list[Change] = field(default_factory=list)
    """A dry run's change set, one entry per object it looked at (empty for a real run)."""
    survivors: list[Ref] = field(default_factory=list)
    """Objects a prune looked at that the deletion policy kept: they stay in the module's inventory."""
    facts: dict[str, list[str]] = field(default_factory=dict)
    """:func:`object_key` → [UID, :func:`installer.objects.foreign.guard`] of each object as the API server returned
    it to the installer's write (or as recorded, for an object left as it was)."""

    def record(self) -> None:
        """Append what was applied, deleted and spared to ``$KS_INVENTORY_FILE`` (the engine's run inventory)."""
        append_entry({"applied": self.applied_refs, "deleted": self.deleted_refs, "spared": self.spared,
                      "foreign": self.foreign, "facts": self.facts})
