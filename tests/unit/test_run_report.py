"""The run report alone: fed a plan and the executor's events, it writes the status, Events, log lines, metrics
and timeline a user reads, through fake sinks (no cluster)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from installer_state import DEFAULT_CC

from installer.config import prepare
from installer.engine.hook_metrics import HookMetrics
from installer.engine.plan import Action, Plan, Step
from installer.engine.records import Record
from installer.engine.run_report import RunReport
from installer.engine.runner import RunOutcome
from installer.engine.status import StatusWriter
from installer.modules import MODULES
from installer.spec import merge


class Sink:
    """The cc's status as the patches build it, and the patches themselves."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.status: dict[str, Any] = {}

    def patch_status(self, status: dict[str, Any]) -> None:
        self.patches.append(copy.deepcopy(status))
        _merge_patch(self.status, status)

    def condition(self, type_: str) -> dict[str, Any]:
        return next(c for c in self.status["conditions"] if c["type"] == type_)


def _merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def normal(self, reason: str, message: str) -> None:
        self.seen.append(("Normal", reason, message))

    def warning(self, reason: str, message: str) -> None:
        self.seen.append(("Warning", reason, message))


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        self.now += dt.timedelta(seconds=10)
        return self.now


def _spec(**on: bool) -> Any:
    spec = copy.deepcopy(DEFAULT_CC["spec"])
    for name, value in on.items():
        merge(spec, {name: {"enabled": value}})
    prepared = prepare(spec)
    assert not prepared.errors, prepared.errors
    return prepared


def _report(tmp_path: Path, records: dict[str, Record], current: dict[str, Any] | None = None
            ) -> tuple[RunReport, Sink, Events]:
    sink, events = Sink(), Events()
    report = RunReport(StatusWriter(sink, current), events, HookMetrics(str(tmp_path / "metrics")),
                       tmp_path / "results", 7, records, clock=Clock())
    return report, sink, events


def _ok(module: str, action: Action) -> RunOutcome:
    return RunOutcome(module, action, True, "successful", tasks=3)


FAILED = RunOutcome("devops", Action.INSTALL, False, "failed", failed_task="wait for jenkins",
                    message="timed out waiting for deployment", tasks=5)


def _installed(prepared: Any, *skip: str) -> dict[str, Record]:
    """A record for every module the spec enables (but ``skip``)."""
    return {m.name: Record(m.name, f"{m.name}-hash", {}) for m in MODULES if m.enabled(prepared.spec)
            and m.name not in skip}


def test_a_run_that_installs_and_uninstalls_reports_what_a_user_reads(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    prepared = _spec(devops=True, events=False)
    records = _installed(prepared, "devops") | {"events": Record("events", "e1", {})}
    report, sink, events = _report(tmp_path, records, {"events": {"status": "enabled"}})
    plan = Plan((Step("devops", Action.INSTALL, "devops-hash"), Step("events", Action.UNINSTALL)))
    caplog.set_level(logging.INFO, "installer")
    report.planned(prepared, plan, {})
    patches = len(sink.patches)
    report.running()
    report.started(plan.steps[0])
    assert len(sink.patches) == patches  # written together, once the modules that start together started
    report.launched()
    assert len(sink.patches) == patches + 1
    assert sink.condition("Ready")["status"] == "Unknown" and sink.condition("Ready")["reason"] == "Progressing"
    assert sink.condition("Reconciling")["message"] == "install devops; uninstall events"
    assert sink.status["modules"]["devops"]["phase"] == "Installing"
    report.task_started("devops", 2, "Apply the devops objects")
    report.tick()  # within the interval after the last flush: nothing yet
    assert sink.status["modules"]["devops"]["task"] == 0
    records["devops"] = Record("devops", "devops-hash", {})  # the reconcile records the success first
    report.finished(plan.steps[0], _ok("devops", Action.INSTALL))
    report.started(plan.steps[1])
    report.launched()
    del records["events"]
    report.finished(plan.steps[1], _ok("events", Action.UNINSTALL))
    report.collecting()
    outcomes = {"devops": _ok("devops", Action.INSTALL), "events": _ok("events", Action.UNINSTALL)}
    report.finish(outcomes, stopping=False, welcome_running=False, state_revision="42")

    status = sink.status
    assert status["devops"]["status"] == "enabled" and "enabledTime" in status["devops"]
    assert "events" not in status
    assert status["modules"]["devops"]["phase"] == "Installed" and status["modules"]["devops"]["tasks"] == 3
    assert status["modules"]["events"]["phase"] == "Uninstalled"
    assert sink.condition("Ready")["status"] == "True" and sink.condition("Ready")["observedGeneration"] == 7
    assert sink.condition("Reconciling")["status"] == "False"
    assert status["observedGeneration"] == 7 and status["stateRevision"] == "42"
    assert [(t, r) for t, r, _ in events.seen] == [("Normal", "ModuleInstalling"), ("Normal", "ModuleInstalled"),
                                                   ("Normal", "ModuleUninstalling"), ("Normal", "ModuleUninstalled")]
    assert events.seen[1][2] == "devops installed in 10s"
    lines = [r.getMessage() for r in caplog.records]
    assert "Start installing devops" in lines and "Start uninstalling events" in lines
    assert "task devops status is successful  (1/2)" in lines
    assert "task events status is successful  (2/2)" in lines
    assert lines.index("Collecting installation results ...") > lines.index("task events status is successful  (2/2)")
    kept = json.loads((tmp_path / "results" / "timeline.json").read_text())
    assert kept["generation"] == 7 and [m["module"] for m in kept["modules"]] == ["devops", "events"]
    ops = [json.loads(line) for line in (tmp_path / "metrics").read_text().splitlines()]
    assert {"name": "ks_installer_module_runs_total", "action": "add", "value": 1,
            "labels": {"module": "devops", "action": "install", "outcome": "successful"}} in ops


def test_a_failed_install_marks_its_component_failed_and_schedules_a_retry(tmp_path: Path) -> None:
    prepared = _spec(devops=True, logging=True)
    report, sink, events = _report(tmp_path, _installed(prepared, "devops", "logging"))
    plan = Plan((Step("devops", Action.INSTALL, "d1"), Step("logging", Action.BLOCKED, reason="opensearch")))
    report.planned(prepared, plan, {})
    report.running()
    report.started(plan.steps[0])
    report.launched()
    assert sink.status["modules"]["logging"]["phase"] == "Blocked"
    report.finished(plan.steps[0], FAILED)
    report.finish({"devops": FAILED}, stopping=False, welcome_running=False, state_revision=None)
    module = sink.status["modules"]["devops"]
    assert module["phase"] == "Failed" and module["failedTask"] == "wait for jenkins" and module["attempts"] == 1
    assert module["nextRetryTime"] > "2026-01-02T03:04"
    assert sink.status["devops"] == {"status": "failed", "message": "timed out waiting for deployment"}
    ready = sink.condition("Ready")
    assert ready["status"] == "False" and ready["reason"] == "ModulesFailed"
    assert ready["message"] == "failed: devops; not installed: logging"
    assert ("Warning", "ModuleFailed",
            "devops failed at task 'wait for jenkins': timed out waiting for deployment") in events.seen


def test_invalid_input_stalls_with_the_errors_and_an_event(tmp_path: Path) -> None:
    from installer.config import SpecError

    report, sink, events = _report(tmp_path, {})
    report.invalid([SpecError("devops.enabled", "must be a boolean")])
    assert sink.condition("Stalled")["status"] == "True" and sink.condition("Ready")["reason"] == "InvalidSpec"
    assert sink.condition("Stalled")["message"] == "devops.enabled: must be a boolean"
    assert events.seen == [("Warning", "InvalidSpec", "nothing was changed: devops.enabled: must be a boolean")]
    assert sink.status["observedGeneration"] == 7 and not (tmp_path / "results").exists()


def test_the_console_result_and_a_later_quiet_run_keep_console_ready(tmp_path: Path) -> None:
    records = _installed(_spec())
    report, sink, _ = _report(tmp_path, records)
    report.planned(_spec(), Plan((Step("ks-core", Action.UNCHANGED, "c1"),)), {})
    report.console(True, "ks-apiserver and ks-console are Available", "v3.4.1")
    assert sink.status["core"]["version"] == "v3.4.1" and sink.condition("ConsoleReady")["status"] == "True"

    later, sink2, _ = _report(tmp_path, records, sink.status)
    later.generation = 8
    later.planned(_spec(), Plan((Step("ks-core", Action.UNCHANGED, "c1"),)), {})
    later.finish({}, stopping=False, welcome_running=False, state_revision=None)
    assert sink2.condition("ConsoleReady")["observedGeneration"] == 8
    assert not (tmp_path / "results" / "timeline.json").exists()  # nothing ran: no timeline


class LiveSink(Sink):
    """A cc whose generation and resourceVersion move on as the test says; guarded patches are refused after."""

    def __init__(self, generation: int) -> None:
        super().__init__()
        self.generation, self.version, self.refused = generation, 1, 0
        self.edits_at_next_patch = 0

    def get(self) -> dict[str, Any]:
        return {"metadata": {"generation": self.generation, "resourceVersion": str(self.version)},
                "status": copy.deepcopy(self.status)}

    def patch_status(self, status: dict[str, Any]) -> None:
        super().patch_status(status)
        self.version += 1

    def patch_status_at(self, status: dict[str, Any], resource_version: str) -> bool:
        if self.edits_at_next_patch:  # an edit lands between the read and the write
            self.edits_at_next_patch -= 1
            self.generation += 1
            self.version += 1
        if resource_version != str(self.version):
            self.refused += 1
            return False
        self.patch_status(status)
        return True


def _quiet_run(tmp_path: Path, live: LiveSink) -> RunReport:
    records = _installed(_spec())
    report = RunReport(StatusWriter(live, None), Events(), HookMetrics(str(tmp_path / "metrics")),
                       tmp_path / "results", 7, records, clock=Clock(), live=live)
    report.planned(_spec(), Plan(tuple(Step(n, Action.UNCHANGED, f"{n}-hash") for n in records)), {})
    return report


def test_ready_is_true_only_for_the_generation_the_cc_still_has(tmp_path: Path) -> None:
    live = LiveSink(7)
    _quiet_run(tmp_path, live).finish({}, stopping=False, welcome_running=False, state_revision=None)
    assert (live.condition("Ready")["status"], live.condition("Ready")["observedGeneration"]) == ("True", 7)

    # An edit (generation 8) waits while generation 7's reconcile finishes: Ready is not True for it.
    live = LiveSink(8)
    _quiet_run(tmp_path, live).finish({}, stopping=False, welcome_running=False, state_revision=None)
    ready = live.condition("Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("Unknown", "Progressing", 8)
    assert ready["message"].startswith("generation 8 is not reconciled yet; generation 7: 4 modules installed")
    assert live.status["observedGeneration"] == 7 and live.condition("Reconciling")["status"] == "False"

    # The edit lands between the read and the write: the write is refused, the cc read again.
    live = LiveSink(7)
    live.edits_at_next_patch = 1
    _quiet_run(tmp_path, live).finish({}, stopping=False, welcome_running=False, state_revision=None)
    assert live.refused == 1 and (live.condition("Ready")["status"], live.generation) == ("Unknown", 8)
    written = [c for p in live.patches for c in p.get("conditions", []) if c["type"] == "Ready"]
    assert written and all(c["status"] != "True" for c in written)


def test_an_edit_not_reconciled_turns_a_true_ready_unknown() -> None:
    from installer.engine.status import unreconciled

    ready = {"type": "Ready", "status": "True", "reason": "Installed", "message": "4 modules installed",
             "observedGeneration": 3, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    other = {"type": "Stalled", "status": "False", "observedGeneration": 3}
    cc = {"metadata": {"generation": 4}, "status": {"observedGeneration": 3, "conditions": [other, ready]}}
    (stalled, marked) = unreconciled(cc)["conditions"]  # type: ignore[index]
    assert stalled == other
    assert (marked["status"], marked["reason"], marked["observedGeneration"]) == ("Unknown", "Progressing", 4)
    assert marked["message"] == "generation 4 is not reconciled yet"
    assert unreconciled({**cc, "metadata": {"generation": 3}}) is None  # Ready is about this generation
    failed = {**ready, "status": "False"}
    assert unreconciled({**cc, "status": {"conditions": [failed]}}) is None  # only a True turns
