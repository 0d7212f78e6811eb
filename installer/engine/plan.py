"""Decide, module by module, what a reconcile must do.

install   enabled, never installed successfully
upgrade   enabled, and the recorded hash differs (inputs, playbook/role/engine code or installer version
          changed), or the last run did not finish (an open intent), or its objects drifted
uninstall recorded (installed, or a run of it started), now disabled (derived enablement counts)
unchanged nothing to do
blocked   enabled but a required module is disabled, or a dependency cannot be installed
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from installer.engine.changes import describe_changes
from installer.engine.fingerprint import inputs_of, module_hash
from installer.engine.records import Record
from installer.engine.unset import inputs_without_unset
from installer.modules import FIRST_INSTALL_ONLY, MODULES, Module, by_name, readers
from installer.spec import Spec, get, has


class Action(StrEnum):
    INSTALL = "install"
    UPGRADE = "upgrade"
    UNINSTALL = "uninstall"
    UNCHANGED = "unchanged"
    BLOCKED = "blocked"


RUNNABLE = (Action.INSTALL, Action.UPGRADE, Action.UNINSTALL)


@dataclass(frozen=True)
class Step:
    module: str
    action: Action
    hash: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    changes: tuple[str, ...] = ()
    reason: str = ""
    note: str = ""
    """What a user should know although nothing runs for it (e.g. why a module is kept)."""
    purge: bool = False
    """An uninstall that also removes the module's PVCs and CRDs (those no custom resource is left of)."""


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
        out["notes"] = {s.module: s.note for s in self.steps if s.note}
        out["purge"] = [s.module for s in self.steps if s.purge]
        return out


FilesDigest = Callable[[Module], str]


def build_plan(spec: Spec, records: dict[str, Record], files: FilesDigest, *, force: bool = False,
               plain: Spec | None = None, kept: dict[str, Any] | None = None,
               drift: dict[str, list[str]] | None = None, remove_all: bool = False,
               purge: Collection[str] = ()) -> Plan:
    """Plan one reconcile of ``spec`` against the stored ``records``.

    ``kept`` are switch paths the cc lacks that kept their last value (``plain`` is the spec without them):
    a module enabled only through them says so. ``drift`` names, per module, objects that went missing or
    were changed by someone else: those modules are re-applied. ``remove_all`` plans the uninstall of every
    module the records hold (full removal); an uninstall of a module in ``purge`` removes its PVCs and CRDs.
    """
    enabled = {m.name: not remove_all and m.enabled(spec) for m in MODULES}
    steps: dict[str, Step] = {}
    for module in MODULES:
        step = _step(module, spec, records.get(module.name), enabled, steps, files, force,
                     (drift or {}).get(module.name))
        note = _kept_note(module, plain, kept or {}) if enabled[module.name] and plain is not None else ""
        note = "; ".join(n for n in (step.note, note) if n)
        steps[module.name] = replace(step, note=note) if note else step
        if step.action == Action.UNINSTALL and module.name in purge:
            steps[module.name] = replace(steps[module.name], purge=True,
                                         changes=(*step.changes, "purge: its PVCs and CRDs go too"))
    return Plan(tuple(steps.values()))


def _kept_note(module: Module, plain: Spec, kept: dict[str, Any]) -> str:
    """Why a module the cc's own values would disable stays: the switches the cc lacks."""
    paths = [p for p in module.enabled.paths if p in kept]
    if not paths or module.enabled(plain):
        return ""
    return "kept: " + "; ".join(f"spec.{p} is absent (last applied: {json.dumps(kept[p])}); set "
                                f"{p}: {json.dumps(get(plain, p))} to uninstall" for p in paths)


def _step(module: Module, spec: Spec, record: Record | None, enabled: dict[str, bool],
          planned: dict[str, Step], files: FilesDigest, force: bool, drift: list[str] | None) -> Step:
    name = module.name
    intent = record.intent if record else None
    if not enabled[name]:
        if record is None:  # a record always holds a finished run or an intent: never installed, nothing to do
            return Step(name, Action.UNCHANGED, reason="disabled")
        why = f"disabled; its last {intent.action} did not finish" if intent and not record.installed else "disabled"
        change = "removal of every module (uninstall --all)" if module.enabled(spec) else "enabled: true -> false"
        return Step(name, Action.UNINSTALL, changes=(change,), reason=why)
    inputs, ignored = inputs_of(module, spec), ()
    if record is not None and record.installed:
        inputs, ignored = _first_install_only(inputs, record.inputs)
    digest = module_hash(module, inputs, files(module))
    recorded = inputs_without_unset(record.inputs) if record is not None else {}
    if record is not None and record.installed and record.hash != digest and recorded != record.inputs \
            and module_hash(module, recorded, files(module)) == digest:
        digest = record.hash  # recorded before empty values meant unset (installer.engine.unset): the same inputs
    missing = [r for r in module.requires if not enabled[r]]
    if missing:
        return Step(name, Action.BLOCKED, digest, inputs, reason=f"requires disabled module(s) {', '.join(missing)}")
    installed = record is not None and record.installed
    broken = [d for d in module.depends if planned[d].action == Action.BLOCKED and planned[d].hash is not None]
    if broken and not installed:
        return Step(name, Action.BLOCKED, digest, inputs, reason=f"dependency {', '.join(broken)} is blocked")
    if record is None or not installed:
        unfinished = (f"its last {intent.action} did not finish ({intent.outcome})",) if intent else ()
        return Step(name, Action.INSTALL, digest, inputs, unfinished, reason="not installed")
    changes = tuple(describe_changes(recorded, inputs)) if record.hash != digest else ()
    if record.hash != digest and not changes:
        changes = ("playbooks, roles or installer code changed",)
    if intent is not None:
        changes = (f"its last {intent.action} did not finish ({intent.outcome})", *changes)
    if drift:
        changes = (*changes, *(f"drift: {d}" for d in drift))
    if changes:
        reason = "inputs changed" if record.hash != digest else "repair"
        return Step(name, Action.UPGRADE, digest, inputs, changes, reason=reason,
                    note="; ".join(f"spec.{p} {FIRST_INSTALL_ONLY[p]}" for p in ignored))
    note = "; ".join(f"spec.{p} {FIRST_INSTALL_ONLY[p]}" for p in ignored)
    if force:
        return Step(name, Action.UPGRADE, digest, inputs, ("forced full run",), reason="forced", note=note)
    return Step(name, Action.UNCHANGED, digest, inputs, note=note)


def _first_install_only(inputs: dict[str, Any], applied: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``inputs`` with the :data:`FIRST_INSTALL_ONLY` values put back to what the module was installed with;
    the paths whose value the spec changed."""
    out, ignored = copy.deepcopy(inputs), []
    for path in FIRST_INSTALL_ONLY:
        for key in inputs:
            if key != path and not path.startswith(key + "."):
                continue
            if key not in applied:
                continue  # the module did not read it when installed: nothing to keep
            sub = path[len(key) + 1:]
            new = inputs[key] if not sub else get(inputs[key], sub) if isinstance(inputs[key], dict) else None
            old = applied[key] if not sub else get(applied[key], sub) if isinstance(applied[key], dict) else None
            if new == old:
                continue
            ignored.append(path)
            if not sub:
                out[key] = copy.deepcopy(old)
            elif isinstance(out[key], dict):
                _put(out[key], sub, old, present=isinstance(applied[key], dict) and has(applied[key], sub))
    return out, tuple(dict.fromkeys(ignored))


def _put(node: dict[str, Any], path: str, value: Any, present: bool) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    if present:
        node[leaf] = copy.deepcopy(value)
    else:
        node.pop(leaf, None)


def applied_spec(records: dict[str, Record], previous: Spec | None) -> Spec | None:
    """What transitions are checked against: ``multicluster.clusterRole`` as the installed modules have it
    (``host`` only if the multicluster module was installed; else the role ks-config was installed with).
    A role that was accepted but never applied (its run failed) does not bind the next spec."""
    if previous is None:
        return None
    multicluster = records.get("multicluster")
    if multicluster is not None and multicluster.installed:
        role = "host"
    else:
        config = records.get("ks-config")
        applied = config.inputs.get("multicluster") if config is not None and config.installed else None
        role = applied.get("clusterRole", "none") if isinstance(applied, dict) else "none"
    section = previous.get("multicluster")
    return {**previous, "multicluster": {**(section if isinstance(section, dict) else {}), "clusterRole": role}}


def records_for(spec: Spec, files: FilesDigest) -> dict[str, Record]:
    """Records as if every module enabled by ``spec`` had been installed from it (dry runs)."""
    out = {}
    for module in MODULES:
        if module.enabled(spec):
            inputs = inputs_of(module, spec)
            out[module.name] = Record(module.name, module_hash(module, inputs, files(module)), inputs)
    return out


def run_order(plan: Plan) -> dict[str, dict[str, bool]]:
    """For every runnable step, the runnable steps that must finish first, each mapped to whether its failure
    blocks the step.

    Installs and upgrades wait for their dependencies (blocking) and for the modules they run ``after``
    (ordering only); uninstalls wait for the uninstalls of the modules that depend on them (blocking: remove
    logging before the opensearch it writes to), and for the installs and upgrades of the modules that read
    their switch (ordering only: monitoring drops Istio's monitors before servicemesh removes istio-system).
    """
    modules = by_name()
    runnable = {s.module: s for s in plan.runnable}
    removing = {name for name, step in runnable.items() if step.action == Action.UNINSTALL}
    applying = runnable.keys() - removing
    order: dict[str, dict[str, bool]] = {}
    for name in runnable:
        module = modules[name]
        if name in removing:
            before = {d: True for d in removing if name in modules[d].depends + modules[d].requires}
            before |= {d: False for d in readers(name) if d in applying}
        else:
            after = [d for d in applying if d != name and not modules[d].last] if module.last else module.after
            before = {d: False for d in after if d in applying}
            before |= {d: True for d in module.depends + module.requires if d in applying}
        order[name] = before
    return order


def launch_priority(order: dict[str, dict[str, bool]]) -> dict[str, tuple[int, int, int]]:
    """The order in which steps that are ready at once take the free slots (smallest first): what the console
    waits for, then the step with the longest chain of steps waiting behind it, then the registry's order."""
    waiters: dict[str, list[str]] = {name: [] for name in order}
    for name, before in order.items():
        for dependency in before:
            waiters[dependency].append(name)
    console: set[str] = set()
    todo = [m.name for m in MODULES if m.console and m.name in order]
    while todo:
        name = todo.pop()
        if name not in console:
            console.add(name)
            todo.extend(order[name])
    chain: dict[str, int] = {}

    def behind(name: str) -> int:
        if name not in chain:
            chain[name] = 1 + max((behind(w) for w in waiters[name]), default=0)
        return chain[name]

    index = {m.name: i for i, m in enumerate(MODULES)}
    return {name: (name not in console, -behind(name), index[name]) for name in order}
