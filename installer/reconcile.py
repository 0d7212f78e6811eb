"""One reconcile of the ClusterConfiguration: load, validate, plan, run, record, report."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer import KS_VERSION, timeline
from installer.cc_events import CcEvents
from installer.cluster import ClusterConfigurations, cluster_facts
from installer.config import Prepared, SpecError, format_errors, prepare
from installer.drift import find_drift
from installer.engine_settings import Settings
from installer.executor import Events, execute
from installer.fingerprint import DigestCache
from installer.forkserver import SERVER
from installer.hook_metrics import HookMetrics
from installer.lease import Lease
from installer.manifests import WaitStopped
from installer.member_clusters import role_change_errors
from installer.modules import MODULES, dependencies, get_module, switch_paths
from installer.plan import Action, Plan, Step, applied_spec, build_plan
from installer.records import Intent, Record
from installer.retry import backoff_seconds
from installer.runner import PlaybookRunner, RunOutcome, clean_run_dirs
from installer.settings import MEMBERS_JOINED, NAMESPACE, PURGE_ANNOTATION
from installer.state import StateStore, write_mirror
from installer.state_codec import StateUnreadable
from installer.status import PHASES, Phase, StatusWriter, now_rfc3339
from installer.version import INSTALLER_VERSION
from installer.welcome import ConsoleNotReady, welcome

log = logging.getLogger("installer")
RULE = "*" * 50
PROGRESS_INTERVAL = 2.0
"""Seconds between status patches that publish the running modules' current tasks."""

_VERB = {Action.INSTALL: "installing", Action.UPGRADE: "upgrading", Action.UNINSTALL: "uninstalling"}
"""``Start installing X`` is upstream's line; upgrades and uninstalls say what they do."""
_EVENT_RUNNING = {Action.INSTALL: "ModuleInstalling", Action.UPGRADE: "ModuleUpgrading",
                  Action.UNINSTALL: "ModuleUninstalling"}
_EVENT_DONE = {Action.INSTALL: "ModuleInstalled", Action.UPGRADE: "ModuleUpgraded",
               Action.UNINSTALL: "ModuleUninstalled"}
_DONE = {Action.INSTALL: "installed", Action.UPGRADE: "upgraded", Action.UNINSTALL: "uninstalled"}
_PHASE_RUNNING = {Action.INSTALL: Phase.INSTALLING, Action.UPGRADE: Phase.UPGRADING,
                  Action.UNINSTALL: Phase.UNINSTALLING}


@dataclass
class ReconcileResult:
    """What a reconcile did (used by the CLI, tests and benchmarks)."""

    plan: Plan | None = None
    outcomes: dict[str, RunOutcome] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)

    @property
    def ran(self) -> list[str]:
        return sorted(self.outcomes)

    @property
    def ok(self) -> bool:
        return not self.errors and all(o.ok for o in self.outcomes.values())


def check_drift(api: client.ApiClient) -> dict[str, list[str]]:
    """Compare every installed module's inventory with the cluster; record the check (and any drift) in status."""
    try:
        records, _ = StateStore(api).load()
    except StateUnreadable:
        return {}  # the reconcile reports it
    drift = find_drift(api, records)
    for module, problems in sorted(drift.items()):
        log.warning("Drift in %s: %s", module, "; ".join(problems))
    ClusterConfigurations(api).patch_status({"lastDriftCheck": now_rfc3339(), "drift": drift or None})
    return drift


def with_dependencies_repaired(api: client.ApiClient, records: dict[str, Record],
                               build: Callable[[dict[str, list[str]] | None], Plan],
                               drift: dict[str, list[str]] | None) -> tuple[Plan, dict[str, list[str]]]:
    """The plan ``build`` makes, and the drift it repairs: when modules install or upgrade, the installed modules
    they build on that would not run are checked for missing objects (a namespace deleted by hand) and re-applied
    first, in the same reconcile, so the new module does not land on a broken base."""
    drift = dict(drift or {})
    plan = build(drift)
    applying = [s.module for s in plan.runnable if s.action in (Action.INSTALL, Action.UPGRADE)]
    base = {d for name in applying for d in dependencies(name)}
    idle = {n: records[n] for n in sorted(base) if n in records and plan.step(n).action == Action.UNCHANGED}
    broken = find_drift(api, idle, missing_only=True) if idle else {}
    for module, problems in sorted(broken.items()):
        log.warning("Drift in %s, which %s build on: %s", module,
                    ", ".join(n for n in applying if module in dependencies(n)), "; ".join(problems))
    if not broken:
        return plan, drift
    drift |= broken
    return build(drift), drift


def purge_names(cc: dict[str, Any]) -> list[str]:
    """The names in the cc's purge annotation, in order."""
    value = (cc["metadata"].get("annotations") or {}).get(PURGE_ANNOTATION) or ""
    return [n.strip() for n in value.split(",") if n.strip()]


def purge_requested(cc: dict[str, Any]) -> set[str]:
    """Modules the purge annotation names (``all``: every module); unknown names are reported and ignored."""
    names, known = set(purge_names(cc)), {m.name for m in MODULES}
    if "all" in names:
        return known
    if names - known:
        log.warning("%s names unknown modules, ignored: %s", PURGE_ANNOTATION, ", ".join(sorted(names - known)))
    return names & known


STATE_UNREADABLE = "StateUnreadable"
REPAIR_STATE = ("Inspect it with `python -m installer state show` and repair it with `python -m installer state reset "
                "[--module M]`")


@dataclass
class Planned:
    """prepare → plan for one cc: the plan, or the errors (and the Stalled reason) that stop it."""

    prepared: Prepared | None = None
    plan: Plan | None = None
    records: dict[str, Record] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)
    reason: str = ""
    """``StateUnreadable``, ``InvalidSpec`` or ``MembersJoined`` when there is no plan."""
    drift: dict[str, list[str]] = field(default_factory=dict)


def unreadable_state(planned: Planned) -> str:
    """What an unreadable state says: the Secret, the key and the decoder's complaint."""
    return f"the installer's state is unreadable: {planned.errors[0].message}"


def prepare_plan(api: client.ApiClient, store: StateStore, files: Callable[[Any], str], cc: dict[str, Any], *,
                 force: bool = False, drift: dict[str, list[str]] | None = None, remove_all: bool = False,
                 purge_all: bool = False) -> Planned:
    """The one path from a cc to its plan, shared by the reconcile, ``plan``, ``images`` and ``uninstall --all``:
    read the recorded state, load + default + migrate + validate the spec, and plan it with the purge annotation
    (or ``purge_all``) and the dependencies' repairs."""
    try:
        records, previous = store.load()
    except StateUnreadable as exc:
        return Planned(errors=[SpecError("state", str(exc))], reason=STATE_UNREADABLE)
    applied = applied_spec(records, previous)
    prepared = prepare(cc.get("spec"), previous, switch_paths(), applied)
    if prepared.errors:
        return Planned(prepared, records=records, errors=prepared.errors, reason="InvalidSpec")
    if errors := role_change_errors(api, applied, prepared.spec):
        return Planned(prepared, records=records, errors=errors, reason=MEMBERS_JOINED)
    purge = {m.name for m in MODULES} if purge_all else purge_requested(cc)

    def build(drift: dict[str, list[str]] | None) -> Plan:
        return build_plan(prepared.spec, records, files, force=force, plain=prepared.plain, kept=prepared.kept,
                          drift=drift, remove_all=remove_all, purge=purge)

    plan, drift = with_dependencies_repaired(api, records, build, drift)
    return Planned(prepared, plan, records, drift=drift)


class Reconciler(Events):
    """One reconcile. ``cancel`` (SIGTERM) cancels running playbooks and starts no further module; losing
    the lease starts no further module and lets running ones finish."""

    def __init__(self, api: client.ApiClient, settings: Settings, cancel: threading.Event | None = None) -> None:
        self.api = api
        self.settings = settings
        self.cancel = cancel or threading.Event()
        self.stop = threading.Event()
        self.ccs = ClusterConfigurations(api)
        self.store = StateStore(api)
        self.digests = DigestCache(settings.digest_cache, settings.playbooks_dir, settings.roles_dir)

    def stopping(self) -> bool:
        return self.stop.is_set() or self.cancel.is_set()

    def files(self, module: Any) -> str:
        return self.digests(module)

    def plan(self, cc: dict[str, Any], force: bool = False, drift: dict[str, list[str]] | None = None) -> Planned:
        """What a reconcile of ``cc`` would run, without running it."""
        return prepare_plan(self.api, self.store, self.files, cc, force=force, drift=drift)

    def run(self, force: bool = False, cc: dict[str, Any] | None = None,
            drift: dict[str, list[str]] | None = None) -> ReconcileResult:
        """Reconcile ``cc`` (read from the API when not given); ``drift`` names modules to repair."""
        cc = cc if cc is not None else self.ccs.get()
        if cc is None:
            log.info("ClusterConfiguration %s/ks-installer not found; nothing to do", NAMESPACE)
            return ReconcileResult()
        SERVER.prefork()  # before the Lease's thread starts
        with Lease(self.api, on_lost=self.stop.set).held():
            return self._run(cc, force, drift)

    def remove_all(self, purge: bool = False) -> ReconcileResult:
        """Uninstall every module the state records, dependents first; then forget the state and delete the cc,
        so nothing installs it again. ``purge`` also removes PVCs and CRDs. A failure keeps state and cc, and
        running it again continues."""
        cc = self.ccs.get()
        if cc is None:
            raise RuntimeError(f"ClusterConfiguration {NAMESPACE}/ks-installer not found: nothing to uninstall from")
        SERVER.prefork()
        with Lease(self.api, on_lost=self.stop.set).held():
            result = self._run(cc, False, None, remove_all=True, purge_all=purge)
            if result.ok:
                self.store.delete()
                self.settings.running_file.unlink(missing_ok=True)
                self.ccs.delete()
                log.info("Removed every module, the installer's state and ClusterConfiguration %s/ks-installer",
                         NAMESPACE)
            return result

    def _run(self, cc: dict[str, Any], force: bool, drift: dict[str, list[str]] | None,
             remove_all: bool = False, purge_all: bool = False) -> ReconcileResult:
        self.generation = cc["metadata"].get("generation")
        self.drift = drift or {}
        self.removing_all = remove_all
        self.events = CcEvents(self.api, cc)
        self.metrics = HookMetrics()
        self.timeline: list[dict[str, Any]] = []
        self.run_started = timeline.now_iso()
        self.module_started: dict[str, dt.datetime] = {}
        clean_run_dirs(self.settings.run_dir)  # under the lease: no other run of ours is using it
        self.status = StatusWriter(self.ccs, cc.get("status"))
        planned = prepare_plan(self.api, self.store, self.files, cc, force=force, drift=drift,
                               remove_all=remove_all, purge_all=purge_all)
        self.records = planned.records
        if planned.reason == STATE_UNREADABLE:
            self._report_stalled(STATE_UNREADABLE, f"{unreadable_state(planned)}; nothing was run or uninstalled. "
                                 f"{REPAIR_STATE}")
            return ReconcileResult(errors=planned.errors)
        if planned.errors:
            self._report_invalid(planned.errors, planned.reason)
            return ReconcileResult(errors=planned.errors)
        assert planned.prepared is not None and planned.plan is not None
        prepared, plan, self.drift = planned.prepared, planned.plan, planned.drift
        spec = prepared.spec
        if prepared.migrations:
            log.info("Migrated legacy settings: %s", "; ".join(prepared.migrations))
        self.status.update({"migrations": prepared.migrations or None})  # a note the spec no longer needs goes
        for warning in prepared.warnings:
            log.warning("%s", warning)
        self.status.update({"warnings": prepared.warnings or None})
        self.store.save_spec(spec)
        self.spec = spec
        self.current_plan = plan
        self.outcomes_: dict[str, RunOutcome] = {}
        self.welcome_thread: threading.Thread | None = None
        self.total = len(plan.runnable)
        self.done = 0
        self._log_plan(plan)
        for step in plan.steps:
            if step.note:
                log.warning("[%s] %s", step.module, step.note)
                self.status.module(step.module, (self.status.current.get("modules") or {}).get(step.module, {})
                                   .get("phase") or Phase.INSTALLED, message=step.note)
        self.status.condition("Stalled", False, "SpecValid", "the spec is valid", self.generation)
        outcomes: dict[str, RunOutcome] = {}
        if plan.runnable:
            self.status.condition("Reconciling", True, "Running", self._summary(plan), self.generation)
            # Not Ready while modules run (nor when the installer dies mid-run): kubectl get cc's READY says so.
            self.status.condition("Ready", None, "Progressing", self._summary(plan), self.generation)
            self.status.update({"modulesReady": self._modules_ready()})
            for step in plan.steps:
                if step.action == Action.BLOCKED:
                    self.blocked(step, [step.reason])
            self.status.flush()
            variables = {**spec, **cluster_facts(self.api), "ks_version": KS_VERSION,
                         "ks_installer_version": INSTALLER_VERSION, "ks_namespace": NAMESPACE}
            runner = PlaybookRunner(self.settings, variables, self.cancel, on_task=self.task_started)
            log.info(RULE)
            log.info("Waiting for all tasks to be completed ...")
            outcomes = execute(plan, runner.run, self, self.settings.max_parallel, self.stopping)
            log.info(RULE)
            log.info("Collecting installation results ...")
        if self.welcome_thread is None and not self.settings.running_file.exists():
            self._maybe_welcome()  # e.g. after a pod restart: nothing ran, but the file is gone
        if self.welcome_thread is not None:
            self.welcome_thread.join()
        self._finish(plan, outcomes)
        self._purged(cc, {n for n, o in outcomes.items() if o.ok and plan.step(n).purge})
        return ReconcileResult(plan, outcomes)

    def _purged(self, cc: dict[str, Any], done: set[str]) -> None:
        """Drop the modules whose purge is done from the annotation (all of it once none is left)."""
        names = purge_names(cc)
        if not done or not names or self.removing_all or "all" in names:
            return  # "all" stays until the user removes it
        known = {m.name for m in MODULES}
        left = [n for n in names if n in known - done]  # unknown names were reported
        log.info("Purged %s; %s", ", ".join(sorted(done)),
                 f"{PURGE_ANNOTATION} now names {', '.join(left)}" if left else f"removed {PURGE_ANNOTATION}")
        self.ccs.set_annotation(PURGE_ANNOTATION, ",".join(left) or None)

    # Events from the executor (always on this thread).
    def started(self, step: Step) -> None:
        log.info("Start %s %s", _VERB[step.action], step.module)
        self.module_started[step.module] = dt.datetime.now(dt.UTC)
        self.events.normal(_EVENT_RUNNING[step.action], f"Start {_VERB[step.action]} {step.module}")
        for change in step.changes:
            log.info("[%s] %s", step.module, change)
        self._intend(step, "running")
        self.status.module(step.module, _PHASE_RUNNING[step.action], hash=step.hash, task=0, currentTask=None)
        self.status.flush()

    def task_started(self, module: str, index: int, task: str) -> None:
        """From a playbook's thread: the module's current task, published by tick() at most every few seconds."""
        self.status.update({"modules": {module: {"task": index, "currentTask": task[:200]}}})

    def tick(self) -> None:
        self.status.flush_every(PROGRESS_INTERVAL)

    def _intend(self, step: Step, outcome: str) -> None:
        """Record that the module's run started (or how it ended without success): until a success clears it,
        the next reconcile treats the module as possibly half-applied."""
        record = self.records.get(step.module) or Record(step.module, None, {})
        started = record.intent.started_at if record.intent and outcome != "running" else now_rfc3339()
        record = replace(record, intent=Intent(step.action.value, step.hash, started, outcome))
        self.store.save(record)
        self.records[step.module] = record

    def not_started(self, steps: list[Step], why: str) -> None:
        log.warning("Not started, %s: %s", why, ", ".join(s.module for s in steps))

    def finished(self, step: Step, outcome: RunOutcome) -> None:
        self.done += 1
        self.outcomes_[step.module] = outcome
        state = "successful" if outcome.ok else "interrupted" if outcome.interrupted else "failed"
        log.info("task %s status is %s  (%d/%d)", step.module, state, self.done, self.total)
        # The run's task count stays as the next run's estimate (python -m installer watch).
        self.status.update({"modules": {step.module: {"task": None, "currentTask": None,
                                                      "tasks": outcome.tasks or None}}})
        end = dt.datetime.now(dt.UTC)
        start = self.module_started.pop(step.module, end)
        seconds = (end - start).total_seconds()
        self.metrics.module_ran(step.module, step.action.value, state, seconds)
        self.timeline.append({"module": step.module, "action": step.action.value, "outcome": state,
                              "start": start.isoformat(), "end": end.isoformat(),
                              "failedTask": outcome.failed_task, "tasks": list(outcome.spans)})
        if outcome.interrupted:
            self.events.warning("ModuleInterrupted", f"{step.module}: {outcome.message}")
        elif outcome.ok:
            self.events.normal(_EVENT_DONE[step.action], f"{step.module} {_DONE[step.action]} in {seconds:.0f}s")
        module = get_module(step.module)
        if outcome.interrupted:
            self._intend(step, "interrupted")
            self.status.module(step.module, Phase.INTERRUPTED, message=outcome.message)
        elif not outcome.ok:
            self._intend(step, "failed")
            self._failed(step, outcome)
            if step.action == Action.INSTALL:  # an upgrade that failed leaves the installed version running
                for key, on in module.status_keys(self.spec).items():
                    if on:
                        self.status.failed(key, outcome.message or f"{step.module} failed")
        elif step.action == Action.UNINSTALL:
            self.store.forget(step.module)
            self.records.pop(step.module, None)
            self.status.module(step.module, Phase.UNINSTALLED, hash=None, attempts=None, nextRetryTime=None)
            for key in module.status_keys(self.spec):
                self.status.cleared(key)
        else:
            record = Record(step.module, step.hash, step.inputs, now_rfc3339(), INSTALLER_VERSION, outcome.inventory)
            self.store.save(record)
            self.records[step.module] = record
            self.status.module(step.module, Phase.INSTALLED, hash=step.hash, attempts=None, nextRetryTime=None,
                               message=step.note or None)
            if step.module in self.drift:
                self.status.update({"drift": {step.module: None}})
            for key, on in module.status_keys(self.spec).items():
                if on:
                    self.status.enabled(key)
                else:
                    self.status.cleared(key)
            self._maybe_welcome()
        self.status.flush()

    def _modules_ready(self) -> str:
        """``installed/enabled`` for kubectl get cc: a module counts when a finished run installed it at the hash
        the spec asks for now (not while it is about to re-run, nor after a failed upgrade)."""
        enabled = [] if self.removing_all else [m.name for m in MODULES if m.enabled(self.spec)]
        wanted = {s.module: s.hash for s in self.current_plan.steps}
        ready = sum(1 for n in enabled if n in self.records and self.records[n].current_at(wanted.get(n)))
        return f"{ready}/{len(enabled)}"

    def _complete(self, name: str) -> bool:
        """Installed by a run that finished: no later run of it is open."""
        record = self.records.get(name)
        return record is not None and record.complete

    def _maybe_welcome(self) -> None:
        """Start the result step once every console module is installed and none is still to run."""
        console = [m.name for m in MODULES if m.console]
        to_run = {s.module for s in self.current_plan.runnable}
        if self.welcome_thread or not all(self._complete(n) for n in console):
            return
        if any(n in to_run and n not in self.outcomes_ for n in console):
            return
        self.welcome_thread = threading.Thread(target=self._welcome, name="welcome")
        self.welcome_thread.start()

    def _welcome(self) -> None:
        try:
            # The box (it carries the initial password) is logged when the console first comes up and after a
            # version change; every later run only refreshes the file KubeKey reads.
            first = (self.status.current.get("core") or {}).get("version") != KS_VERSION
            welcome(self.api, self.settings.running_file, self.settings.console_timeout, announce=first,
                    stop=self.cancel)
        except WaitStopped:
            log.info("Stopped waiting for the console: the installer is stopping; the next start waits again")
            return
        except (ConsoleNotReady, ApiException) as exc:
            log.error("Failed to show the console: %s", exc)
            self.status.condition("ConsoleReady", False, "NotAvailable", str(exc), self.generation)
        else:
            self.status.update({"core": {"version": KS_VERSION}})
            self.status.condition("ConsoleReady", True, "Available", "ks-apiserver and ks-console are Available",
                                  self.generation)
        self.status.flush()

    def _console_still_ready(self) -> None:
        """A reconcile that left the console modules alone keeps ConsoleReady, observed at this generation."""
        console = next((c for c in self.status.conditions if c["type"] == "ConsoleReady"), None)
        if self.welcome_thread is not None or console is None or console.get("status") != "True":
            return
        if all(self._complete(m.name) for m in MODULES if m.console):
            self.status.condition("ConsoleReady", True, console.get("reason") or "Available",
                                  console.get("message") or "", self.generation)

    def blocked(self, step: Step, because: list[str]) -> None:
        message = because[0] if len(because) == 1 and " " in because[0] else f"dependency failed: {', '.join(because)}"
        log.warning("[%s] blocked: %s", step.module, message)
        self.status.module(step.module, Phase.BLOCKED, message=message)

    def _failed(self, step: Step, outcome: RunOutcome) -> None:
        previous = (self.status.current.get("modules") or {}).get(step.module) or {}
        attempts = int(previous.get("attempts") or 0) + 1
        retry_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=backoff_seconds(attempts))
        self.status.module(step.module, Phase.FAILED, message=outcome.message, failedTask=outcome.failed_task,
                           attempts=attempts, nextRetryTime=retry_at.strftime("%Y-%m-%dT%H:%M:%SZ"))
        log.error("Task '%s' failed: %s%s", step.module,
                  f"[{outcome.failed_task}] " if outcome.failed_task else "", outcome.message)
        self.events.warning("ModuleFailed", f"{step.module} failed"
                            f"{f' at task {outcome.failed_task!r}' if outcome.failed_task else ''}: {outcome.message}")

    def _finish(self, plan: Plan, outcomes: dict[str, RunOutcome]) -> None:
        failed = sorted(n for n, o in outcomes.items() if not o.ok and not o.interrupted)
        enabled = [] if self.removing_all else [m.name for m in MODULES if m.enabled(self.spec)]
        pending = sorted(n for n in enabled if not self._complete(n) and n not in failed)
        leftover = sorted(n for n, r in self.records.items() if n not in enabled and n not in failed)
        modules = self.status.current.get("modules") or {}
        for step in plan.steps:  # Failed or Blocked before, but what is installed matches the spec again
            phase = (modules.get(step.module) or {}).get("phase")
            if step.action == Action.UNCHANGED and self._complete(step.module) and phase != Phase.INSTALLED:
                self.status.module(step.module, Phase.INSTALLED, hash=step.hash, attempts=None,
                                   nextRetryTime=None, message=step.note or None)
        if failed or pending or leftover:
            detail = "; ".join(p for p in (
                f"failed: {', '.join(failed)}" if failed else "",
                f"not installed: {', '.join(pending)}" if pending else "",
                f"not uninstalled: {', '.join(leftover)}" if leftover else "") if p)
            reason = "ModulesFailed" if failed else "Interrupted" if self.stopping() else "ModulesPending"
            self.status.condition("Ready", False, reason, detail, self.generation)
            log.warning("Reconcile finished, not Ready: %s", detail)
        else:
            detail = f"{len(enabled)} modules installed: {', '.join(enabled)}"
            self.status.condition("Ready", True, "Installed", detail, self.generation)
            log.info("Reconcile finished, Ready: %s", detail)
        self.status.condition("Reconciling", False, "Done", "reconcile finished", self.generation)
        self._console_still_ready()
        self.status.update({"observedGeneration": self.generation, "modulesReady": self._modules_ready(),
                            "stateRevision": self.store.revision})
        self.status.flush()
        self._count_phases()
        if self.timeline:
            timeline.write(self.settings.results_dir, self.generation, self.run_started, self.timeline)
        write_mirror(self.settings.results_dir / "last-applied-configs.yaml", self.records)

    def _count_phases(self) -> None:
        phases = Counter(m.get("phase") for m in (self.status.current.get("modules") or {}).values())
        self.metrics.phases(dict(phases), PHASES)
        self.metrics.write()

    def _report_invalid(self, errors: list[SpecError], reason: str = "InvalidSpec") -> None:
        # One record: the lines belong together (and a burst of records can lose its level, see hooklog).
        log.error("The ClusterConfiguration spec is invalid; nothing was changed:\n%s",
                  format_errors(errors))
        message = "; ".join(f"{e.path}: {e.message}" for e in errors)
        self.events.warning(reason, f"nothing was changed: {message}")
        self._report_stalled(reason, message, log_it=False)

    def _report_stalled(self, reason: str, message: str, log_it: bool = True) -> None:
        if log_it:
            log.error("%s", message)
        self.status.condition("Stalled", True, reason, message, self.generation)
        self.status.condition("Ready", False, reason, message, self.generation)
        self.status.condition("Reconciling", False, reason, "waiting for the problem to be fixed", self.generation)
        self.status.update({"observedGeneration": self.generation})
        self.status.flush()

    def _log_plan(self, plan: Plan) -> None:
        log.info("Plan: %s", self._summary(plan))

    @staticmethod
    def _summary(plan: Plan) -> str:
        parts = [f"{a.value} {', '.join(plan.names(a))}" for a in Action
                 if a != Action.UNCHANGED and plan.names(a)]
        return "; ".join(parts) or "nothing to do"
