"""Decide, module by module, what a reconcile must do.

install   enabled, never installed (no record)
upgrade   enabled, recorded hash differs (inputs, playbook/role files or installer version changed)
uninstall recorded as installed, now disabled (derived enablement counts)
unchanged nothing to do
blocked   enabled but a required module is disabled, or a dependency cannot be installed
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from installer.changes import describe_changes
from installer.fingerprint import inputs_of, module_hash
from installer.modules import MODULES, Module, by_name
from installer.spec import Spec


class Action(StrEnum):
    INSTALL = "install"
    UPGRADE = "upgrade"
    UNINSTALL = "uninstall"
    UNCHANGED = "unchanged"
    BLOCKED = "blocked"


RUNNABLE = (Action.INSTALL, Action.UPGRADE, Action.UNINSTALL)


@dataclass(frozen=True)
class Record:
    """What the store remembers about an installed module."""

    module: str
    hash: str
    inputs: dict[str, Any]
    applied_at: str = ""
    version: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        return cls(**{k: data[k] for k in ("module", "hash", "inputs") }, applied_at=data.get("applied_at", ""),
                   version=data.get("version", ""))


@dataclass(frozen=True)
class Step:
    module: str
    action: Action
    hash: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    changes: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]

    def step(self, module: str) -> Step:
        return next(s for s in self.steps if s.module == module)

    def names(self, action: Action) -> list[str]:
        return [s.module for s in self.steps if s.action == action]

    @property
    def runnable(self) -> list[Step]:
        return [s for s in self.steps if s.action in RUNNABLE]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {a.value: self.names(a) for a in Action}
        out["changes"] = {s.module: list(s.changes) for s in self.steps if s.changes}
        out["reasons"] = {s.module: s.reason for s in self.steps if s.action == Action.BLOCKED}
        return out


FilesDigest = Callable[[Module], str]


def build_plan(spec: Spec, records: dict[str, Record], files: FilesDigest, *, force: bool = False) -> Plan:
    """Plan one reconcile of ``spec`` against the last-applied ``records``."""
    enabled = {m.name: m.enabled(spec) for m in MODULES}
    steps: dict[str, Step] = {}
    for module in MODULES:
        steps[module.name] = _step(module, spec, records.get(module.name), enabled, steps, files, force)
    return Plan(tuple(steps.values()))


def _step(module: Module, spec: Spec, record: Record | None, enabled: dict[str, bool],
          planned: dict[str, Step], files: FilesDigest, force: bool) -> Step:
    name = module.name
    if not enabled[name]:
        if record is None:
            return Step(name, Action.UNCHANGED, reason="disabled")
        return Step(name, Action.UNINSTALL, changes=("enabled: true -> false",), reason="disabled")
    inputs = inputs_of(module, spec)
    digest = module_hash(module, inputs, files(module))
    missing = [r for r in module.requires if not enabled[r]]
    if missing:
        return Step(name, Action.BLOCKED, digest, inputs, reason=f"requires disabled module(s) {', '.join(missing)}")
    broken = [d for d in module.depends if planned[d].action == Action.BLOCKED and planned[d].hash is not None]
    if broken and record is None:
        return Step(name, Action.BLOCKED, digest, inputs, reason=f"dependency {', '.join(broken)} is blocked")
    if record is None:
        return Step(name, Action.INSTALL, digest, inputs, reason="not installed")
    if record.hash == digest and not force:
        return Step(name, Action.UNCHANGED, digest, inputs)
    if record.hash == digest:
        return Step(name, Action.UPGRADE, digest, inputs, ("forced full run",), reason="forced")
    changes = tuple(describe_changes(record.inputs, inputs)) or ("playbooks, roles or installer version changed",)
    return Step(name, Action.UPGRADE, digest, inputs, changes, reason="inputs changed")


def records_for(spec: Spec, files: FilesDigest) -> dict[str, Record]:
    """Records as if every module enabled by ``spec`` had been installed from it (dry runs)."""
    out = {}
    for module in MODULES:
        if module.enabled(spec):
            inputs = inputs_of(module, spec)
            out[module.name] = Record(module.name, module_hash(module, inputs, files(module)), inputs)
    return out


def run_order(plan: Plan) -> dict[str, set[str]]:
    """For every runnable step, the runnable steps that must finish first.

    Installs and upgrades wait for their dependencies; uninstalls wait for the uninstalls of the modules
    that depend on them (remove logging before the opensearch it writes to).
    """
    modules = by_name()
    runnable = {s.module: s for s in plan.runnable}
    order: dict[str, set[str]] = {}
    for name, step in runnable.items():
        if step.action == Action.UNINSTALL:
            before = {d for d, s in runnable.items() if s.action == Action.UNINSTALL
                      and name in modules[d].depends + modules[d].requires}
        else:
            before = {d for d in modules[name].depends + modules[name].requires
                      if d in runnable and runnable[d].action != Action.UNINSTALL}
        order[name] = before
    return order
