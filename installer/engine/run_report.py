"""The account of one reconcile: from what the plan and the executor report, it writes everything a user reads
about the run — the cc's status (upstream's ``status.<component>``, ``status.modules``, conditions), Kubernetes
Events on the cc, the log lines (``Start installing X``, ``task X status is successful (i/n)``), metrics and the
timeline. It decides nothing and touches no module: the reconcile tells it what happened."""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from installer.config import Prepared, SpecError, format_errors
from installer.engine import timeline
from installer.engine.hook_metrics import HookMetrics
from installer.engine.plan import Action, Plan, Step
from installer.engine.records import Record
from installer.engine.retry import backoff_seconds
from installer.engine.runner import RunOutcome
from installer.engine.status import PHASES, PROGRESSING, LiveCc, Phase, StatusWriter, pending_message
from installer.modules import MODULES, get_module
from installer.spec import get

log = logging.getLogger("installer")
RULE = "*" * 50
PROGRESS_INTERVAL = 2.0
"""Seconds between status patches that publish the running modules' current tasks."""
GUARDED_ATTEMPTS = 5
"""Reads of the cc for the final Ready True (each write is refused if the cc changed after its read)."""

_VERB = {Action.INSTALL: "installing", Action.UPGRADE: "upgrading", Action.UNINSTALL: "uninstalling"}
"""``Start installing X`` is upstream's line; upgrades and uninstalls say what they do."""
_EVENT_RUNNING = {Action.INSTALL: "ModuleInstalling", Action.UPGRADE: "ModuleUpgrading",
                  Action.UNINSTALL: "ModuleUninstalling"}
_EVENT_DONE = {Action.INSTALL: "ModuleInstalled", Action.UPGRADE: "ModuleUpgraded",
               Action.UNINSTALL: "ModuleUninstalled"}
_DONE = {Action.INSTALL: "installed", Action.UPGRADE: "upgraded", Action.UNINSTALL: "uninstalled"}
_PHASE_RUNNING = {Action.INSTALL: Phase.INSTALLING, Action.UPGRADE: Phase.UPGRADING,
                  Action.UNINSTALL: Phase.UNINSTALLING}


class EventSink(Protocol):
    """Where Kubernetes Events about the cc go (installer.engine.cc_events.CcEvents)."""

    def normal(self, reason: str, message: str) -> None: ...
    def warning(self, reason: str, message: str) -> None: ...


def summary(plan: Plan) -> str:
    """``install a, b; uninstall c`` (or ``nothing to do``)."""
    parts = [f"{a.value} {', '.join(plan.names(a))}" for a in Action if a != Action.UNCHANGED and plan.names(a)]
    return "; ".join(parts) or "nothing to do"


@dataclass
class RunReport:
    """Status, Events, log lines, metrics and timeline of one reconcile of generation ``generation``.

    ``records`` is the state as the run updates it (the reconcile's own dict): what counts as installed."""

    status: StatusWriter
    events: EventSink
    metrics: HookMetrics
    results_dir: Path
    generation: int | None
    records: Mapping[str, Record]
    removing_all: bool = False
    spec: dict[str, Any] = field(default_factory=dict)
    plan: Plan = field(default_factory=lambda: Plan(()))
    started_at: str = field(default_factory=timeline.now_iso)
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    total: int = 0
    done: int = 0
    module_started: dict[str, dt.datetime] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    drift: Mapping[str, list[str]] = field(default_factory=dict)
    """Modules whose drift this run repairs: a success clears their ``status.drift`` entry."""
    live: LiveCc | None = None
    """The cc as it is now: Ready True is written only while it is still at ``generation`` (None: unguarded)."""

    # Before anything runs.
    def stalled(self, reason: str, message: str, log_it: bool = True) -> None:
        """Nothing can run until the user fixes something: Stalled, not Ready, not Reconciling."""
        if log_it:
            log.error("%s", message)
        self.status.condition("Stalled", True, reason, message, self.generation)
        self.status.condition("Ready", False, reason, message, self.generation)
        self.status.condition("Reconciling", False, reason, "waiting for the problem to be fixed", self.generation)
        self.status.update({"observedGeneration": self.generation})
        self.status.flush()

    def invalid(self, errors: list[SpecError], reason: str = "InvalidSpec") -> None:
        # One record: the lines belong together (and a burst of records can lose its level, see hooklog).
        log.error("The ClusterConfiguration spec is invalid; nothing was changed:\n%s", format_errors(errors))
        message = "; ".join(f"{e.path}: {e.message}" for e in errors)
        self.events.warning(reason, f"nothing was changed: {message}")
        self.stalled(reason, message, log_it=False)

    def planned(self, prepared: Prepared, plan: Plan, drift: Mapping[str, list[str]]) -> None:
        """The valid spec's notes (migrations, warnings, per-module notes) and the plan."""
        self.spec, self.plan, self.total, self.drift = prepared.spec, plan, len(plan.runnable), drift
        if prepared.migrations:
            log.info("Migrated legacy settings: %s", "; ".join(prepared.migrations))
        self.status.update({"migrations": prepared.migrations or None})  # a note the spec no longer needs goes
        for warning in prepared.warnings:
            log.warning("%s", warning)
        self.status.update({"warnings": prepared.warnings or None})
        log.info("Plan: %s", summary(plan))
        modules = self.status.current.get("modules") or {}
        for step in plan.steps:
            if step.note:
                log.warning("[%s] %s", step.module, step.note)
                self.status.module(step.module, (modules.get(step.module) or {}).get("phase") or Phase.INSTALLED,
                                   message=step.note)
        self.status.condition("Stalled", False, "SpecValid", "the spec is valid", self.generation)

    def running(self) -> None:
        """Modules are about to run: Reconciling, and Ready Unknown (also if the installer dies meanwhile), written with
        the first modules' start (launched)."""
        self.status.condition("Reconciling", True, "Running", summary(self.plan), self.generation)
        self.status.condition("Ready", None, "Progressing", summary(self.plan), self.generation)
        self.status.update({"modulesReady": self.modules_ready()})
        for step in self.plan.steps:
            if step.action == Action.BLOCKED:
                self.blocked(step, [step.reason])
        log.info(RULE)
        log.info("Waiting for all tasks to be completed ...")

    # While modules run (the executor's events, on the reconcile's thread; task_started from a playbook's).
    def started(self, step: Step) -> None:
        log.info("Start %s %s", _VERB[step.action], step.module)
        self.module_started[step.module] = self.clock()
        self.events.normal(_EVENT_RUNNING[step.action], f"Start {_VERB[step.action]} {step.module}")
        for change in step.changes:
            log.info("[%s] %s", step.module, change)
        self.status.module(step.module, _PHASE_RUNNING[step.action], hash=step.hash, task=0, currentTask=None)

    def launched(self) -> None:
        """The modules that could start together have started: one status write for them (and for running())."""
        self.status.flush()

    def task_started(self, module: str, index: int, task: str) -> None:
        """A running module's current task, published by tick() at most every few seconds."""
        self.status.update({"modules": {module: {"task": index, "currentTask": task[:200]}}})

    def tick(self) -> None:
        self.status.flush_every(PROGRESS_INTERVAL)

    def not_started(self, steps: list[Step], why: str) -> None:
        log.warning("Not started, %s: %s", why, ", ".join(s.module for s in steps))

    def blocked(self, step: Step, because: list[str]) -> None:
        message = because[0] if len(because) == 1 and " " in because[0] else f"dependency failed: {', '.join(because)}"
        log.warning("[%s] blocked: %s", step.module, message)
        self.status.module(step.module, Phase.BLOCKED, message=message)

    def finished(self, step: Step, outcome: RunOutcome, flush: bool = True) -> None:
        """A module's run ended (the state already records how). ``flush=False``: its status is written with the
        next write (the run's last module, when :meth:`finish` follows at once)."""
        self.done += 1
        state = "successful" if outcome.ok else "interrupted" if outcome.interrupted else "failed"
        log.info("task %s status is %s  (%d/%d)", step.module, state, self.done, self.total)
        # The run's task count stays as the next run's estimate (python -m installer watch).
        self.status.update({"modules": {step.module: {"task": None, "currentTask": None,
                                                      "tasks": outcome.tasks or None}}})
        end = self.clock()
        start = self.module_started.pop(step.module, end)
        seconds = (end - start).total_seconds()
        self.metrics.module_ran(step.module, step.action.value, state, seconds)
        self.timeline.append({"module": step.module, "action": step.action.value, "outcome": state,
                              "start": start.isoformat(), "end": end.isoformat(),
                              "failedTask": outcome.failed_task, "tasks": list(outcome.spans)})
        module = get_module(step.module)
        if outcome.interrupted:
            self.events.warning("ModuleInterrupted", f"{step.module}: {outcome.message}")
            self.status.module(step.module, Phase.INTERRUPTED, message=outcome.message)
        elif not outcome.ok:
            self._failed(step, outcome)
            if step.action == Action.INSTALL:  # an upgrade that failed leaves the installed version running
                for key, on in module.status_keys(self.spec).items():
                    if on:
                        self.status.failed(key, outcome.message or f"{step.module} failed")
        elif step.action == Action.UNINSTALL:
            self.events.normal(_EVENT_DONE[step.action], f"{step.module} {_DONE[step.action]} in {seconds:.0f}s")
            self.status.module(step.module, Phase.UNINSTALLED, hash=None, attempts=None, nextRetryTime=None)
            for key in module.status_keys(self.spec):
                self.status.cleared(key)
        else:
            self.events.normal(_EVENT_DONE[step.action], f"{step.module} {_DONE[step.action]} in {seconds:.0f}s")
            self.status.module(step.module, Phase.INSTALLED, hash=step.hash, attempts=None, nextRetryTime=None,
                               message=step.note or None, immutable=list(outcome.immutable) or None,
                               foreignRemoved=list(outcome.foreign) or None)
            if step.module in self.drift:
                self.status.update({"drift": {step.module: None}})
            for key, on in module.status_keys(self.spec).items():
                if on:
                    self.status.enabled(key)
                else:
                    self.status.cleared(key)
        if flush:
            self.status.flush()

    def _failed(self, step: Step, outcome: RunOutcome) -> None:
        previous = (self.status.current.get("modules") or {}).get(step.module) or {}
        attempts = int(previous.get("attempts") or 0) + 1
        retry_at = self.clock() + dt.timedelta(seconds=backoff_seconds(attempts))
        self.status.module(step.module, Phase.FAILED, message=outcome.message, failedTask=outcome.failed_task,
                           attempts=attempts, nextRetryTime=retry_at.strftime("%Y-%m-%dT%H:%M:%SZ"))
        log.error("Task '%s' failed: %s%s", step.module,
                  f"[{outcome.failed_task}] " if outcome.failed_task else "", outcome.message)
        self.events.warning("ModuleFailed", f"{step.module} failed"
                            f"{f' at task {outcome.failed_task!r}' if outcome.failed_task else ''}: {outcome.message}")

    def collecting(self) -> None:
        log.info(RULE)
        log.info("Collecting installation results ...")

    # The welcome step's outcome.
    def console(self, ready: bool, message: str, version: str) -> None:
        """ConsoleReady after the welcome step waited for the console (``version``: the KubeSphere it shows)."""
        if ready:
            self.status.update({"core": {"version": version}})
            self.status.condition("ConsoleReady", True, "Available", message, self.generation)
        else:
            log.error("Failed to show the console: %s", message)
            self.status.condition("ConsoleReady", False, "NotAvailable", message, self.generation)
        self.status.flush()

    # After the run.
    def complete(self, name: str) -> bool:
        """Installed by a run that finished: no later run of it is open."""
        record = self.records.get(name)
        return record is not None and record.complete

    def modules_ready(self) -> str:
        """``installed/enabled`` for kubectl get cc: a module counts when a finished run installed it at the hash
        the spec asks for now (not while it is about to re-run, nor after a failed upgrade)."""
        wanted = {s.module: s.hash for s in self.plan.steps}
        ready = sum(1 for n in self._enabled() if n in self.records and self.records[n].current_at(wanted.get(n)))
        return f"{ready}/{len(self._enabled())}"

    def _enabled(self) -> list[str]:
        return [] if self.removing_all else [m.name for m in MODULES if m.enabled(self.spec)]

    def finish(self, outcomes: Mapping[str, RunOutcome], *, stopping: bool, welcome_running: bool,
               state_revision: str | None) -> None:
        """Ready (True, or False with what failed, is missing or is left over), Reconciling done, counts,
        metrics and the timeline."""
        failed = sorted(n for n, o in outcomes.items() if not o.ok and not o.interrupted)
        enabled = self._enabled()
        pending = sorted(n for n in enabled if not self.complete(n) and n not in failed)
        leftover = sorted(n for n in self.records if n not in enabled and n not in failed)
        modules = self.status.current.get("modules") or {}
        for step in self.plan.steps:  # Failed or Blocked before, but what is installed matches the spec again
            phase = (modules.get(step.module) or {}).get("phase")
            if step.action != Action.UNCHANGED or not self.complete(step.module):
                continue
            if phase != Phase.INSTALLED:
                self.status.module(step.module, Phase.INSTALLED, hash=step.hash, attempts=None,
                                   nextRetryTime=None, message=step.note or None)
            # A cc deleted and created again starts with no status: upstream's keys come back for what is installed.
            for key, on in get_module(step.module).status_keys(self.spec).items():
                if on and (get(self.status.current, key) or {}).get("status") != "enabled":
                    self.status.enabled(key)
        problems = "; ".join(p for p in (
            f"failed: {', '.join(failed)}" if failed else "",
            f"not installed: {', '.join(pending)}" if pending else "",
            f"not uninstalled: {', '.join(leftover)}" if leftover else "") if p)
        if problems:
            reason = "ModulesFailed" if failed else "Interrupted" if stopping else "ModulesPending"
            self.status.condition("Ready", False, reason, problems, self.generation)
            log.warning("Reconcile finished, not Ready: %s", problems)
        self.status.condition("Reconciling", False, "Done", "reconcile finished", self.generation)
        if not welcome_running:
            self._console_still_ready()
        self.status.update({"observedGeneration": self.generation, "modulesReady": self.modules_ready(),
                            "stateRevision": state_revision, "stateDigest": None})
        if problems:
            self.status.flush()
        else:
            self._ready(f"{len(enabled)} modules installed: {', '.join(enabled)}")
        phases = Counter(m.get("phase") for m in (self.status.current.get("modules") or {}).values())
        self.metrics.phases(dict(phases), PHASES)
        self.metrics.write()
        if self.timeline:
            timeline.write(self.results_dir, self.generation, self.started_at, self.timeline)

    def _ready(self, detail: str) -> None:
        """Ready True for this run's generation, written only while the cc is still at it (a guarded patch): an edit
        made while the run ran leaves Ready Unknown for the next reconcile, never True for a generation that was
        not reconciled."""
        live_cc = self.live
        for _ in range(GUARDED_ATTEMPTS if live_cc is not None else 0):
            assert live_cc is not None
            self.status.drain()  # the cc as read after this run's own writes, or the guard would refuse
            live = live_cc.get()
            if live is None:
                break
            meta = live.get("metadata") or {}
            version = str(meta.get("resourceVersion"))
            current = meta.get("generation")
            if current != self.generation:
                self.status.condition("Ready", None, PROGRESSING, pending_message(current, self.generation, detail),
                                      current)
                self.status.flush()
                log.info("Reconcile finished for generation %s (%s); generation %s is not reconciled yet, Ready "
                         "Unknown", self.generation, detail, current)
                return
            self.status.condition("Ready", True, "Installed", detail, self.generation)
            if self.status.flush_with(functools.partial(live_cc.patch_status_at, resource_version=version)):
                log.info("Reconcile finished, Ready: %s", detail)
                return
        self.status.condition("Ready", True, "Installed", detail, self.generation)  # no cc to guard against
        self.status.flush()
        log.info("Reconcile finished, Ready: %s", detail)

    def _console_still_ready(self) -> None:
        """A reconcile that left the console modules alone keeps ConsoleReady, observed at this generation."""
        console = next((c for c in self.status.conditions if c["type"] == "ConsoleReady"), None)
        if console is None or console.get("status") != "True":
            return
        if all(self.complete(m.name) for m in MODULES if m.console):
            self.status.condition("ConsoleReady", True, console.get("reason") or "Available",
                                  console.get("message") or "", self.generation)
