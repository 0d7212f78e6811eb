"""One reconcile of the ClusterConfiguration: load, validate, plan, run, record, report."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kubernetes import client

from installer import KS_VERSION
from installer.config import SpecError
from installer.engine.adoption import Takeover
from installer.engine.beside import beside
from installer.engine.cc_events import CcEvents
from installer.engine.drift import find_drift
from installer.engine.executor import Events, execute
from installer.engine.fingerprint import DigestCache
from installer.engine.hook_metrics import HookMetrics
from installer.engine.lease import Lease
from installer.engine.member_clusters import role_change_errors
from installer.engine.ordered_writes import OrderedWrites
from installer.engine.plan import Action, Plan, Step
from installer.engine.planning import (
    REPAIR_STATE,
    STATE_TOO_NEW,
    STATE_UNREADABLE,
    Planned,
    plan_cc,
    purge_names,
    unreadable,
    unreadable_state,
)
from installer.engine.records import Intent, Record
from installer.engine.run_report import RunReport
from installer.engine.runner import PlaybookRunner, RunOutcome, clean_run_dirs, killed_runs, run_variables
from installer.engine.state import StateStore, write_mirror
from installer.engine.state_codec import StateUnreadable
from installer.engine.status import StatusWriter, mark_unreconciled, now_rfc3339
from installer.engine.welcome import WelcomeStep
from installer.engine_settings import Settings
from installer.launch.forkserver import SERVER
from installer.modules import MODULES, dependencies
from installer.objects.cluster import ClusterConfigurations, cluster_facts
from installer.settings import NAMESPACE, PURGE_ANNOTATION
from installer.version import INSTALLER_VERSION

log = logging.getLogger("installer")


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


def state_unreadable(api: client.ApiClient) -> bool:
    """Whether the state Secret cannot be read (or a newer installer wrote it): a reconcile reports it (Stalled)."""
    try:
        StateStore(api).load()
    except StateUnreadable:
        return True
    return False


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


def prepare_plan(api: client.ApiClient, store: StateStore, files: Callable[[Any], str], cc: dict[str, Any], *,
                 force: bool = False, drift: dict[str, list[str]] | None = None, remove_all: bool = False,
                 purge_all: bool = False) -> Planned:
    """:func:`installer.engine.planning.plan_cc` against the cluster: the state read from its Secret, the member
    clusters checked, and the dependencies' repairs."""
    try:
        records, previous = store.load()
    except StateUnreadable as exc:
        return unreadable(exc)
    return plan_cc(cc, records, previous, files, force=force, drift=drift, remove_all=remove_all,
                   purge_all=purge_all, role_check=lambda applied, spec: role_change_errors(api, applied, spec),
                   repair=lambda records, build, drift: with_dependencies_repaired(api, records, build, drift))


class ModuleRuns(Events):
    """The modules of one reconcile as the executor runs them: each run is recorded in the state (an intent when it
    starts; the record on success, forgotten after an uninstall), told to the report, and the welcome step starts
    once the console's modules are in place."""

    def __init__(self, store: StateStore, records: dict[str, Record], plan: Plan, report: RunReport,
                 welcome: WelcomeStep, early_welcome: bool = False) -> None:
        self.store, self.records, self.plan, self.report, self.welcome = store, records, plan, report, welcome
        self.early_welcome = early_welcome
        """Start the welcome step as the first modules start, when the console's modules are installed and none
        of them is to run (the console waited for beside the run, not after it)."""
        self.outcomes: dict[str, RunOutcome] = {}
        self.takeover = Takeover(store.core.api_client, first=not records)

    def started(self, step: Step) -> None:
        self._intend(step, "running")
        if step.action == Action.INSTALL:
            self.takeover.before(step.module)
        self.report.started(step)

    def finished(self, step: Step, outcome: RunOutcome) -> None:
        self.outcomes[step.module] = outcome
        if not outcome.ok:
            self._intend(step, "interrupted" if outcome.interrupted else "failed", outcome.inventory, outcome.objects)
        elif step.action == Action.UNINSTALL:
            self.store.forget(step.module)
            self.records.pop(step.module, None)
        else:
            record = Record(step.module, step.hash, step.inputs, now_rfc3339(), INSTALLER_VERSION, outcome.inventory,
                            objects=dict(outcome.objects))
            self.store.save(record)
            self.records[step.module] = record
            self.takeover.after(step.module)  # the original's Helm releases it took over are retired
        last = len(self.outcomes) == len(self.plan.runnable)
        if last:
            self.takeover.report(self.report.status)  # what no module took over: status.adoption
        # The last module's status goes with the run's final write when nothing is left to wait for before it.
        self.report.finished(step, outcome, flush=not (last and self.welcome.reported.is_set()))
        if outcome.ok and step.action != Action.UNINSTALL:
            self.maybe_welcome()

    def launched(self) -> None:
        self.report.launched()
        if self.early_welcome:
            self.maybe_welcome()

    def blocked(self, step: Step, because: list[str]) -> None:
        self.report.blocked(step, because)

    def not_started(self, steps: list[Step], why: str) -> None:
        self.report.not_started(steps, why)

    def tick(self) -> None:
        self.report.tick()

    def _intend(self, step: Step, outcome: str, applied: tuple[tuple[str, str, str, str], ...] = (),
                objects: dict[str, tuple[str, str]] | None = None) -> None:
        """Record that the module's run started (or how it ended without success): until a success clears it,
        the next reconcile treats the module as possibly half-applied. What a failed run ``applied`` joins the
        recorded inventory."""
        record = self.records.get(step.module) or Record(step.module, None, {})
        started = record.intent.started_at if record.intent and outcome != "running" else now_rfc3339()
        inventory = tuple(sorted(set(record.inventory) | set(applied)))
        record = replace(record, intent=Intent(step.action.value, step.hash, started, outcome), inventory=inventory,
                         objects={**record.objects, **(objects or {})})
        self.store.save(record)
        self.records[step.module] = record

    def inventory(self, module: str) -> tuple[tuple[str, str, str, str], ...]:
        """The module's recorded inventory: what its last successful run made, with what failed runs since
        applied."""
        record = self.records.get(module)
        return record.inventory if record is not None else ()

    def facts(self, module: str) -> dict[str, tuple[str, str]]:
        """The module's recorded objects: the UIDs it owns and what it left on them (Record.objects)."""
        record = self.records.get(module)
        return record.objects if record is not None else {}

    def maybe_welcome(self) -> None:
        """Start the welcome step once every console module is installed and none is still to run."""
        console = [m.name for m in MODULES if m.console]
        to_run = {s.module for s in self.plan.runnable}
        if self.welcome.started or not all(self.report.complete(n) for n in console):
            return
        if any(n in to_run and n not in self.outcomes for n in console):
            return
        self.welcome.start()


class Reconciler:
    """Reconciles the cc: takes the Lease, prepares the plan, runs its modules and reports. ``cancel`` (SIGTERM)
    cancels running playbooks and starts no further module; losing the lease starts no further module and lets
    running ones finish."""

    def __init__(self, api: client.ApiClient, settings: Settings, cancel: threading.Event | None = None) -> None:
        self.api = api
        self.settings = settings
        self.cancel = cancel or threading.Event()
        self.stop = threading.Event()
        self.ccs = ClusterConfigurations(api)
        self.store = StateStore(api)
        self.digests = DigestCache(settings.digest_cache, settings.roles_dir,
                                   plays_dir=settings.playbooks_dir)

    def stopping(self) -> bool:
        return self.stop.is_set() or self.cancel.is_set()

    def files(self, module: Any) -> str:
        return self.digests(module)

    def plan(self, cc: dict[str, Any], force: bool = False, drift: dict[str, list[str]] | None = None) -> Planned:
        """What a reconcile of ``cc`` would run, without running it."""
        return prepare_plan(self.api, self.store, self.files, cc, force=force, drift=drift)

    def run(self, force: bool = False, cc: dict[str, Any] | None = None,
            drift: dict[str, list[str]] | None = None, scheduled: bool = False) -> ReconcileResult:
        """Reconcile ``cc`` (read from the API when not given); ``drift`` names modules to repair. ``scheduled``:
        started by the schedule alone (a retry or drift check due), which shows the welcome box only if a module
        ran."""
        cc = cc if cc is not None else self.ccs.get()
        if cc is None:
            log.info("ClusterConfiguration %s/ks-installer not found; nothing to do", NAMESPACE)
            return ReconcileResult()
        SERVER.prefork()  # before any thread of the run starts
        # Ready Unknown for a generation not reconciled yet, beside the Lease's acquisition; both before the plan.
        marked = beside(lambda: mark_unreconciled(self.ccs, cc), "ready-unknown")
        try:
            with Lease(self.api, on_lost=self.stop.set).held():
                marked.result()
                return self._run(cc, force, drift, scheduled=scheduled)
        finally:
            marked.result()  # its failure is the run's, even when the Lease was not taken

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

    def _record_killed_runs(self) -> None:
        """A run killed mid-way (its container restarted, the run dir kept) left its inventory file: what it applied,
        with the UIDs the API server returned to those writes, joins the module's record, so that the next prune or
        uninstall removes exactly that (never objects that only carry the module's label)."""
        killed = killed_runs(self.settings.run_dir)
        if not killed:
            return
        try:
            records, _ = self.store.load()
        except StateUnreadable:
            return  # the plan reports it
        for module, (refs, facts) in killed.items():
            record = records.get(module)
            if record is None or record.intent is None or not refs:
                continue
            objects = {**record.objects, **{key: (uid, guard) for key, (uid, guard) in facts.items()}}
            self.store.save(replace(record, inventory=tuple(sorted(set(record.inventory) | set(refs))),
                                    objects=objects))
            log.info("[%s] the run killed mid-way had applied %d objects: recorded as the module's", module,
                     len(refs))

    def _run(self, cc: dict[str, Any], force: bool, drift: dict[str, list[str]] | None,
             remove_all: bool = False, purge_all: bool = False, scheduled: bool = False) -> ReconcileResult:
        self._record_killed_runs()
        clean_run_dirs(self.settings.run_dir)  # under the lease: no other run of ours is using it
        planned = prepare_plan(self.api, self.store, self.files, cc, force=force, drift=drift,
                               remove_all=remove_all, purge_all=purge_all)
        writes = OrderedWrites("status-writes")  # status and Events go out beside the run, in order
        report = RunReport(StatusWriter(self.ccs, cc.get("status"), writes), CcEvents(self.api, cc, writes),
                           HookMetrics(), self.settings.results_dir, cc["metadata"].get("generation"),
                           planned.records, removing_all=remove_all, live=self.ccs)
        try:
            result = self._report(cc, planned, report, remove_all, scheduled)
        except BaseException:
            writes.drain(raise_error=False)
            raise
        writes.drain()  # every write of the run sent before the Lease is let go
        return result

    def _report(self, cc: dict[str, Any], planned: Planned, report: RunReport, remove_all: bool,
                scheduled: bool) -> ReconcileResult:
        """The planned run, executed and reported."""
        if planned.reason == STATE_UNREADABLE:
            report.stalled(STATE_UNREADABLE, f"{unreadable_state(planned)}; nothing was run or uninstalled. "
                           f"{REPAIR_STATE}")
            return ReconcileResult(errors=planned.errors)
        if planned.reason == STATE_TOO_NEW:
            report.stalled(STATE_TOO_NEW, planned.errors[0].message)
            return ReconcileResult(errors=planned.errors)
        if planned.errors:
            report.invalid(planned.errors, planned.reason)
            return ReconcileResult(errors=planned.errors)
        assert planned.prepared is not None and planned.plan is not None
        plan, spec = planned.plan, planned.prepared.spec
        report.planned(planned.prepared, plan, planned.drift)
        self.store.save_spec(spec, with_next=bool(plan.runnable))  # then in the same write as the first intent
        enabled = [m.name for m in MODULES if m.enabled(spec)]
        core = [m.name for m in MODULES if m.core_phase and m.name in enabled]
        welcome = WelcomeStep(self.api, self.settings.running_file, self.settings.console_timeout, self.cancel,
                              lambda ready, message: report.console(ready, message, KS_VERSION),
                              missing=lambda: [n for n in core if not report.complete(n)],
                              pending=lambda: [n for n in enabled if not report.complete(n)])
        # An edit's run waits for the console beside its modules (a scheduled run decides at its end, as before).
        runs = ModuleRuns(self.store, planned.records, plan, report, welcome,
                          early_welcome=not (remove_all or scheduled))
        if plan.runnable:
            variables = beside(lambda: run_variables(spec, cluster_facts(self.api)), "cluster-facts")
            report.running()
            runner = PlaybookRunner(self.settings, variables, self.cancel, on_task=report.task_started,
                                    inventories=runs.inventory, api=self.api, facts=runs.facts)
            try:
                execute(plan, runner.run, runs, self.settings.max_parallel, self.stopping)
            except BaseException:
                welcome.settle(write=False)
                raise
            finally:
                self.store.save_staged()  # no module started (all blocked, or stopping): the spec alone
            report.collecting()
        # Every module of the run has ended: kubesphere_running may be written, and the box shown (as upstream's
        # every run did) unless only the schedule started this one and it ran nothing: no box every few minutes.
        welcome_due = not remove_all and (not scheduled or bool(runs.outcomes)
                                          or not self.settings.running_file.exists())
        welcome.settle(announce=welcome_due)
        if welcome_due and not welcome.started:
            runs.maybe_welcome()  # nothing ran (an edit, a pod restart), or what ran failed
        welcome.join()
        report.finish(runs.outcomes, stopping=self.stopping(), welcome_running=welcome.started,
                      state_revision=self.store.revision)
        write_mirror(self.settings.results_dir / "last-applied-configs.yaml", planned.records)
        self._purged(cc, {n for n, o in runs.outcomes.items() if o.ok and plan.step(n).purge}, remove_all)
        return ReconcileResult(plan, runs.outcomes)

    def _purged(self, cc: dict[str, Any], done: set[str], removing_all: bool) -> None:
        """Drop the modules whose purge is done from the annotation (all of it once none is left)."""
        names = purge_names(cc)
        if not done or not names or removing_all or "all" in names:
            return  # "all" stays until the user removes it
        known = {m.name for m in MODULES}
        left = [n for n in names if n in known - done]  # unknown names were reported
        log.info("Purged %s; %s", ", ".join(sorted(done)),
                 f"{PURGE_ANNOTATION} now names {', '.join(left)}" if left else f"removed {PURGE_ANNOTATION}")
        self.ccs.set_annotation(PURGE_ANNOTATION, ",".join(left) or None)
