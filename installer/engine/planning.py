"""The one path from a cc to its plan: load + default + migrate + validate its spec against the recorded state,
then plan every module with the purge annotation. Pure (no Kubernetes client): the reconcile, ``plan``,
``images``, ``uninstall --all`` and the hook's fast path all come through here; what only the API can tell (member
clusters joined, the dependencies' drift) the reconcile passes in as checks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from installer.config import Prepared, SpecError, prepare
from installer.engine.plan import FilesDigest, Plan, applied_spec, build_plan
from installer.engine.records import Record
from installer.engine.state_codec import StateTooNew, StateUnreadable
from installer.escape import escaped
from installer.modules import MODULES, switch_paths
from installer.settings import MEMBERS_JOINED, PURGE_ANNOTATION
from installer.spec import Spec

log = logging.getLogger("installer")

STATE_UNREADABLE = "StateUnreadable"
STATE_TOO_NEW = "StateFromNewerInstaller"
REPAIR_STATE = ("Inspect it with `python -m installer state show` and repair it with `python -m installer state reset "
                "[--module M]`")

Drift = dict[str, list[str]]
RoleCheck = Callable[[Spec | None, Spec], list[SpecError]]
"""Errors in the transition from the applied spec to the new one that only the cluster can tell."""
Repair = Callable[[dict[str, Record], Callable[[Drift | None], Plan], Drift | None], tuple[Plan, Drift]]
"""The plan (and the drift it repairs) once the modules the new ones build on are checked."""


@dataclass
class Planned:
    """prepare → plan for one cc: the plan, or the errors (and the Stalled reason) that stop it."""

    prepared: Prepared | None = None
    plan: Plan | None = None
    records: dict[str, Record] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)
    reason: str = ""
    """``StateUnreadable``, ``InvalidSpec`` or ``MembersJoined`` when there is no plan."""
    drift: Drift = field(default_factory=dict)


def unreadable(exc: StateUnreadable) -> Planned:
    """No plan: the state Secret cannot be read (the message names the Secret, the key and the decoder's
    complaint), or a newer installer wrote it."""
    reason = STATE_TOO_NEW if isinstance(exc, StateTooNew) else STATE_UNREADABLE
    return Planned(errors=[SpecError("state", str(exc))], reason=reason)


def unreadable_state(planned: Planned) -> str:
    """What an unreadable state says: the Secret, the key and the decoder's complaint."""
    return f"the installer's state is unreadable: {planned.errors[0].message}"


def purge_names(cc: dict[str, Any]) -> list[str]:
    """The names in the cc's purge annotation, in order."""
    value = ((cc.get("metadata") or {}).get("annotations") or {}).get(PURGE_ANNOTATION) or ""
    return [n.strip() for n in value.split(",") if n.strip()]


def purge_requested(cc: dict[str, Any]) -> set[str]:
    """Modules the purge annotation names (``all``: every module); unknown names are reported and ignored."""
    names, known = set(purge_names(cc)), {m.name for m in MODULES}
    if "all" in names:
        return known
    if names - known:
        log.warning("%s names unknown modules, ignored: %s", PURGE_ANNOTATION,
                    ", ".join(escaped(n, 60) for n in sorted(names - known)[:20]))
    return names & known


def plan_cc(cc: dict[str, Any], records: dict[str, Record], previous: Spec | None, files: FilesDigest, *,
            force: bool = False, drift: Drift | None = None, remove_all: bool = False, purge_all: bool = False,
            role_check: RoleCheck | None = None, repair: Repair | None = None) -> Planned:
    """Plan ``cc`` against the recorded state (``records``, the ``previous`` accepted spec)."""
    applied = applied_spec(records, previous)
    prepared = prepare(cc.get("spec"), previous, switch_paths(), applied, cc.get("status"))
    if prepared.errors:
        return Planned(prepared, records=records, errors=prepared.errors, reason="InvalidSpec")
    if role_check is not None and (errors := role_check(applied, prepared.spec)):
        return Planned(prepared, records=records, errors=errors, reason=MEMBERS_JOINED)
    purge = {m.name for m in MODULES} if purge_all else purge_requested(cc)

    def build(repairing: Drift | None) -> Plan:
        return build_plan(prepared.spec, records, files, force=force, plain=prepared.plain, kept=prepared.kept,
                          drift=repairing, remove_all=remove_all, purge=purge)

    if repair is None:
        return Planned(prepared, build(drift), records, drift=dict(drift or {}))
    plan, repaired = repair(records, build, drift)
    return Planned(prepared, plan, records, drift=repaired)
