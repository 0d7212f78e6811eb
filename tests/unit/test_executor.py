"""The DAG executor, the hook binding and retry backoff: pure logic."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from installer.engine.executor import Events, execute
from installer.engine.plan import Action, Plan, Step
from installer.engine.retry import backoff_seconds, due_for_retry
from installer.engine.runner import RunOutcome
from installer.modules import MODULES

REPO = Path(__file__).resolve().parents[2]


class Recorder(Events):
    def __init__(self) -> None:
        self.log: list[str] = []

    def started(self, step: Step) -> None:
        self.log.append(f"start {step.module}")

    def launched(self) -> None:
        self.log.append("launched")

    def finished(self, step: Step, outcome: RunOutcome) -> None:
        self.log.append(f"{'ok' if outcome.ok else 'fail'} {step.module}")

    def blocked(self, step: Step, because: list[str]) -> None:
        self.log.append(f"blocked {step.module} by {','.join(because)}")


def _plan(**actions: Action) -> Plan:
    return Plan(tuple(Step(name.replace("_", "-") if name in ("ks_core", "ks_config") else name, action)
                      for name, action in actions.items()))


def _execute(plan: Plan, failing: str, max_parallel: int) -> tuple[list[str], dict[str, RunOutcome]]:
    """Run ``plan`` with every module succeeding but ``failing``; the events' log and the outcomes."""
    events = Recorder()
    outcomes = execute(plan, lambda step: RunOutcome(step.module, step.action, step.module != failing, "done"), events,
                       max_parallel=max_parallel)
    return events.log, outcomes


def test_dependencies_run_first_and_failures_block_dependents() -> None:
    plan = _plan(preinstall=Action.INSTALL, ks_core=Action.INSTALL, opensearch=Action.INSTALL,
                 fluentbit=Action.INSTALL, logging=Action.INSTALL, monitoring=Action.INSTALL)
    log, outcomes = _execute(plan, "opensearch", max_parallel=2)
    assert log.index("ok preinstall") < log.index("start ks-core")
    assert "blocked logging by opensearch" in log
    assert "logging" not in outcomes
    assert outcomes["fluentbit"].ok and outcomes["monitoring"].ok


def test_modules_that_start_together_are_announced_once() -> None:
    """The status is written once per batch of starts (launched), not once per module."""
    plan = _plan(preinstall=Action.INSTALL, redis=Action.INSTALL, openldap=Action.INSTALL, ks_core=Action.INSTALL)
    log, _ = _execute(plan, "", max_parallel=4)
    assert log[:2] == ["start preinstall", "launched"]
    batch = log.index("ok preinstall") + 1
    assert sorted(log[batch:batch + 2]) == ["start openldap", "start redis"] and log[batch + 2] == "launched"
    assert log[log.index("start ks-core") + 1] == "launched" and log.count("launched") == 3


def _all_installed(max_parallel: int) -> list[str]:
    plan = Plan(tuple(Step(m.name, Action.INSTALL) for m in MODULES))
    log, outcomes = _execute(plan, "", max_parallel=max_parallel)
    assert set(outcomes) == {m.name for m in MODULES}  # no cycle, every module ran
    return [line for line in log if line != "launched"]


def test_gatekeeper_and_telemetry_go_in_after_every_other_module() -> None:
    """Gatekeeper's webhook reviews every write once registered; telemetry reports what is installed."""
    log = _all_installed(max_parallel=4)
    others_done = max(log.index(f"ok {m.name}") for m in MODULES if m.name not in ("gatekeeper", "telemetry"))
    assert log.index("start gatekeeper") > others_done and log.index("start telemetry") > others_done


def test_free_slots_go_to_the_console_first_then_to_the_longest_chains() -> None:
    """With one slot, the console's modules (and what they wait for) all run before any other module; then
    servicemesh, which monitoring, devops and alerting wait behind, before modules nothing waits for."""
    log = [line.split()[1] for line in _all_installed(max_parallel=1) if line.startswith("start ")]
    console = ["preinstall", "redis", "openldap", "ks-core", "minio", "ks-config"]
    assert log[:len(console)] == console
    assert log.index("opensearch") < log.index("servicemesh") < log.index("monitoring") < log.index("devops")
    assert log.index("servicemesh") < log.index("metrics_server") and log.index("monitoring") < log.index("network")


def test_parallelism_is_capped() -> None:
    plan = _plan(redis=Action.INSTALL, openldap=Action.INSTALL, minio=Action.INSTALL, gatekeeper=Action.INSTALL,
                 metrics_server=Action.INSTALL)
    lock, running, peak = threading.Lock(), [0], [0]

    def run(step: Step) -> RunOutcome:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return RunOutcome(step.module, step.action, True, "done")

    execute(plan, run, Recorder(), max_parallel=2)
    assert peak[0] == 2


def test_uninstall_waits_for_the_readers_of_its_switch_but_not_for_their_success() -> None:
    """Disabling servicemesh re-runs monitoring (it drops Istio's monitors from istio-system) and ks-config;
    servicemesh goes after them, and still goes when one of them fails. A failed reader's own dependents are
    blocked, and the uninstall waits for them no longer."""
    plan = _plan(servicemesh=Action.UNINSTALL, monitoring=Action.UPGRADE, preinstall=Action.UPGRADE,
                 ks_config=Action.UPGRADE, telemetry=Action.UPGRADE)
    log, outcomes = _execute(plan, "ks-config", max_parallel=4)
    assert log.index("ok monitoring") < log.index("start servicemesh")
    assert log.index("fail ks-config") < log.index("start servicemesh")
    assert "blocked telemetry by ks-config" in log
    assert outcomes["servicemesh"].ok


def test_monitoring_follows_servicemesh_into_istio_system_even_when_it_fails() -> None:
    """Enabling servicemesh re-runs monitoring for Istio's monitors: it runs after servicemesh (which creates
    istio-system), and a failed servicemesh does not block it."""
    log, outcomes = _execute(_plan(servicemesh=Action.INSTALL, monitoring=Action.UPGRADE), "servicemesh", 4)
    assert log.index("fail servicemesh") < log.index("start monitoring")
    assert outcomes["monitoring"].ok


def test_uninstall_runs_dependents_first_and_crash_is_a_failure() -> None:
    plan = _plan(opensearch=Action.UNINSTALL, logging=Action.UNINSTALL, gatekeeper=Action.INSTALL)
    events = Recorder()

    def run(step: Step) -> RunOutcome:
        if step.module == "gatekeeper":
            raise RuntimeError("boom")
        return RunOutcome(step.module, step.action, True, "done")

    outcomes = execute(plan, run, events)
    assert events.log.index("ok logging") < events.log.index("start opensearch")
    assert not outcomes["gatekeeper"].ok and "boom" in (outcomes["gatekeeper"].message or "")


def test_backoff_doubles_and_caps() -> None:
    assert [backoff_seconds(n) for n in (1, 2, 3)] == [30, 60, 120]
    assert backoff_seconds(50) == 1800


def test_due_for_retry_only_lists_failed_modules_past_their_backoff() -> None:
    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    status = {"modules": {
        "a": {"phase": "Failed", "nextRetryTime": "2026-01-01T11:59:00Z"},
        "b": {"phase": "Failed", "nextRetryTime": "2026-01-01T12:05:00Z"},
        "c": {"phase": "Installed"},
    }}
    assert due_for_retry(status, now) == ["a"]
    assert due_for_retry(None, now) == []


def test_hook_config_is_a_shell_operator_v1_binding() -> None:
    out = subprocess.run([sys.executable, str(REPO / "hooks" / "kubesphere" / "installRunner.py"), "--config"],
                         capture_output=True, text=True, check=True).stdout
    config = json.loads(out)
    assert config["configVersion"] == "v1"
    watch = config["kubernetes"][0]
    assert watch["apiVersion"] == "installer.kubesphere.io/v1alpha1" and watch["kind"] == "ClusterConfiguration"
    assert watch["nameSelector"] == {"matchNames": ["ks-installer"]}
    assert watch["namespace"] == {"nameSelector": {"matchNames": ["kubesphere-system"]}}
    assert watch["jqFilter"] == ".spec" and watch["executeHookOnEvent"] == ["Added", "Modified"]
    assert config["schedule"][0]["crontab"]
