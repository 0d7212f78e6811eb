"""One reconcile of the ClusterConfiguration: load, validate, plan, run, record, report."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer import KS_VERSION, __version__
from installer.config import SpecError, prepare
from installer.executor import Events, execute
from installer.fingerprint import files_digest
from installer.kube import ClusterConfigurations, cluster_facts
from installer.lease import Lease
from installer.modules import MODULES, get_module
from installer.plan import Action, Plan, Record, Step, build_plan
from installer.runner import Outcome, PlaybookRunner
from installer.settings import NAMESPACE, Settings
from installer.state import StateStore, write_mirror
from installer.status import Phase, StatusWriter, now_rfc3339
from installer.welcome import ConsoleNotReady, welcome

log = logging.getLogger("installer")
RULE = "*" * 50
BACKOFF_BASE, BACKOFF_MAX = 30, 1800

_PHASE_RUNNING = {Action.INSTALL: Phase.INSTALLING, Action.UPGRADE: Phase.UPGRADING,
                  Action.UNINSTALL: Phase.UNINSTALLING}


@dataclass
class Result:
    """What a reconcile did (used by the CLI, tests and benchmarks)."""

    plan: Plan | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)

    @property
    def ran(self) -> list[str]:
        return sorted(self.outcomes)

    @property
    def ok(self) -> bool:
        return not self.errors and all(o.ok for o in self.outcomes.values())


def backoff_seconds(attempts: int) -> int:
    return min(BACKOFF_BASE * 2 ** max(0, attempts - 1), BACKOFF_MAX)


def due_for_retry(status: dict[str, Any] | None, now: dt.datetime | None = None) -> list[str]:
    """Failed modules whose backoff has expired."""
    now = now or dt.datetime.now(dt.UTC)
    due = []
    for name, mod in ((status or {}).get("modules") or {}).items():
        if mod.get("phase") != Phase.FAILED:
            continue
        retry_at = mod.get("nextRetryTime")
        if not retry_at or dt.datetime.fromisoformat(retry_at.replace("Z", "+00:00")) <= now:
            due.append(name)
    return sorted(due)


class Reconciler(Events):
    def __init__(self, api: client.ApiClient, settings: Settings, cancel: threading.Event | None = None) -> None:
        self.api = api
        self.settings = settings
        self.cancel = cancel or threading.Event()
        self.ccs = ClusterConfigurations(api)
        self.store = StateStore(api)

    def files(self, module: Any) -> str:
        return files_digest(module, self.settings.playbooks_dir, self.settings.roles_dir)

    def plan(self, cc: dict[str, Any], force: bool = False) -> tuple[Plan | None, list[SpecError], Any]:
        records, previous = self.store.load()
        prepared = prepare(cc.get("spec"), previous)
        if prepared.errors:
            return None, prepared.errors, prepared
        return build_plan(prepared.spec, records, self.files, force=force), [], prepared

    def run(self, force: bool = False, cc: dict[str, Any] | None = None) -> Result:
        """Reconcile ``cc`` (read from the API when not given)."""
        cc = cc if cc is not None else self.ccs.get()
        if cc is None:
            log.info("ClusterConfiguration %s/ks-installer not found; nothing to do", NAMESPACE)
            return Result()
        with Lease(self.api).held():
            return self._run(cc, force)

    def _run(self, cc: dict[str, Any], force: bool) -> Result:
        self.generation = cc["metadata"].get("generation")
        self.status = StatusWriter(self.ccs, cc.get("status"))
        self.records, previous = self.store.load()
        prepared = prepare(cc.get("spec"), previous)
        if prepared.errors:
            self._report_invalid(prepared.errors)
            return Result(errors=prepared.errors)
        spec = prepared.spec
        if prepared.migrations:
            log.info("Migrated legacy settings: %s", "; ".join(prepared.migrations))
            self.status.update({"migrations": prepared.migrations})
        self.store.save_spec(spec)
        plan = build_plan(spec, self.records, self.files, force=force)
        self.spec = spec
        self.plan_ = plan
        self.outcomes_: dict[str, Outcome] = {}
        self.welcome_thread: threading.Thread | None = None
        self.total = len(plan.runnable)
        self.done = 0
        self._log_plan(plan)
        self.status.condition("Stalled", False, "SpecValid", "the spec is valid", self.generation)
        outcomes: dict[str, Outcome] = {}
        if plan.runnable:
            self.status.condition("Reconciling", True, "Running", self._summary(plan), self.generation)
            for step in plan.steps:
                if step.action == Action.BLOCKED:
                    self.blocked(step, [step.reason])
            self.status.flush()
            variables = {**spec, **cluster_facts(self.api), "ks_version": KS_VERSION,
                         "ks_installer_version": __version__, "ks_namespace": NAMESPACE}
            runner = PlaybookRunner(self.settings, variables, self.cancel)
            log.info(RULE)
            log.info("Waiting for all tasks to be completed ...")
            outcomes = execute(plan, runner.run, self, self.settings.max_parallel)
            log.info(RULE)
            log.info("Collecting installation results ...")
        if self.welcome_thread is None and not self.settings.running_file.exists():
            self._maybe_welcome()  # e.g. after a pod restart: nothing ran, but the file is gone
        if self.welcome_thread is not None:
            self.welcome_thread.join()
        self._finish(plan, outcomes)
        return Result(plan, outcomes)

    # Events from the executor (always on this thread).
    def started(self, step: Step) -> None:
        verb = "uninstalling" if step.action == Action.UNINSTALL else "installing"
        log.info("Start %s %s", verb, step.module)
        for change in step.changes:
            log.info("[%s] %s", step.module, change)
        self.status.module(step.module, _PHASE_RUNNING[step.action], hash=step.hash)
        self.status.flush()

    def finished(self, step: Step, outcome: Outcome) -> None:
        self.done += 1
        self.outcomes_[step.module] = outcome
        state = "successful" if outcome.ok else "failed"
        log.info("task %s status is %s  (%d/%d)", step.module, state, self.done, self.total)
        module = get_module(step.module)
        if not outcome.ok:
            self._failed(step, outcome)
        elif step.action == Action.UNINSTALL:
            self.store.forget(step.module)
            self.records.pop(step.module, None)
            self.status.module(step.module, Phase.UNINSTALLED, hash=None, attempts=None, nextRetryTime=None)
            if module.status_key:
                self.status.cleared(module.status_key)
        else:
            record = Record(step.module, step.hash or "", step.inputs, now_rfc3339(), __version__)
            self.store.save(record)
            self.records[step.module] = record
            self.status.module(step.module, Phase.INSTALLED, hash=step.hash, attempts=None, nextRetryTime=None)
            if module.status_key:
                self.status.enabled(module.status_key)
            self._maybe_welcome()
        self.status.flush()

    def _maybe_welcome(self) -> None:
        """Start the result step once every console module is installed and none is still to run."""
        console = [m.name for m in MODULES if m.console]
        to_run = {s.module for s in self.plan_.runnable}
        if self.welcome_thread or any(n not in self.records for n in console):
            return
        if any(n in to_run and n not in self.outcomes_ for n in console):
            return
        self.welcome_thread = threading.Thread(target=self._welcome, name="welcome")
        self.welcome_thread.start()

    def _welcome(self) -> None:
        try:
            welcome(self.api, self.settings.running_file, self.settings.console_timeout)
        except (ConsoleNotReady, ApiException) as exc:
            log.error("Failed to show the console: %s", exc)
            self.status.condition("ConsoleReady", False, "NotAvailable", str(exc), self.generation)
        else:
            self.status.update({"core": {"version": KS_VERSION}})
            self.status.condition("ConsoleReady", True, "Available", "ks-apiserver and ks-console are Available",
                                  self.generation)
        self.status.flush()

    def blocked(self, step: Step, because: list[str]) -> None:
        message = because[0] if len(because) == 1 and " " in because[0] else f"dependency failed: {', '.join(because)}"
        log.warning("[%s] blocked: %s", step.module, message)
        self.status.module(step.module, Phase.BLOCKED, message=message)

    def _failed(self, step: Step, outcome: Outcome) -> None:
        previous = (self.status.current.get("modules") or {}).get(step.module) or {}
        attempts = int(previous.get("attempts") or 0) + 1
        retry_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=backoff_seconds(attempts))
        self.status.module(step.module, Phase.FAILED, message=outcome.message, failedTask=outcome.failed_task,
                           attempts=attempts, nextRetryTime=retry_at.strftime("%Y-%m-%dT%H:%M:%SZ"))
        log.error("Task '%s' failed: %s%s", step.module,
                  f"[{outcome.failed_task}] " if outcome.failed_task else "", outcome.message)

    def _finish(self, plan: Plan, outcomes: dict[str, Outcome]) -> None:
        failed = sorted(n for n, o in outcomes.items() if not o.ok)
        enabled = [m.name for m in MODULES if m.enabled(self.spec)]
        pending = sorted(n for n in enabled if n not in self.records)
        modules = self.status.current.get("modules") or {}
        for step in plan.steps:  # Failed or Blocked before, but what is installed matches the spec again
            phase = (modules.get(step.module) or {}).get("phase")
            if step.action == Action.UNCHANGED and step.module in self.records and phase != Phase.INSTALLED:
                self.status.module(step.module, Phase.INSTALLED, hash=step.hash, attempts=None,
                                   nextRetryTime=None)
        if failed or pending:
            detail = "; ".join(p for p in (
                f"failed: {', '.join(failed)}" if failed else "",
                f"not installed: {', '.join(n for n in pending if n not in failed)}"
                if set(pending) - set(failed) else "") if p)
            self.status.condition("Ready", False, "ModulesFailed" if failed else "ModulesPending", detail,
                                  self.generation)
            log.warning("Reconcile finished, not Ready: %s", detail)
        else:
            detail = f"{len(enabled)} modules installed: {', '.join(enabled)}"
            self.status.condition("Ready", True, "Installed", detail, self.generation)
            log.info("Reconcile finished, Ready: %s", detail)
        self.status.condition("Reconciling", False, "Done", "reconcile finished", self.generation)
        installed = sum(1 for n in enabled if n in self.records)
        self.status.update({"observedGeneration": self.generation, "modulesReady": f"{installed}/{len(enabled)}"})
        self.status.flush()
        write_mirror(self.settings.results_dir / "last-applied-configs.yaml", self.records)

    def _report_invalid(self, errors: list[SpecError]) -> None:
        log.error("The ClusterConfiguration spec is invalid; nothing was changed:")
        for err in errors:
            log.error("  %s: %s", err.path, err.message)
        message = "; ".join(f"{e.path}: {e.message}" for e in errors)
        self.status.condition("Stalled", True, "InvalidSpec", message, self.generation)
        self.status.condition("Ready", False, "InvalidSpec", message, self.generation)
        self.status.condition("Reconciling", False, "InvalidSpec", "waiting for a valid spec", self.generation)
        self.status.update({"observedGeneration": self.generation})
        self.status.flush()

    def _log_plan(self, plan: Plan) -> None:
        log.info("Plan: %s", self._summary(plan))

    @staticmethod
    def _summary(plan: Plan) -> str:
        parts = [f"{a.value} {', '.join(plan.names(a))}" for a in Action
                 if a != Action.UNCHANGED and plan.names(a)]
        return "; ".join(parts) or "nothing to do"
