"""The metric operations the hook appends to shell-operator's $METRICS_PATH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from installer.engine.hook_metrics import HookMetrics
from installer.engine.status import PHASES


def test_runs_failures_and_phases_are_written_once(tmp_path: Path) -> None:
    path = tmp_path / "metrics"
    metrics = HookMetrics(str(path))
    metrics.module_ran("monitoring", "install", "successful", 41.2)
    metrics.module_ran("logging", "upgrade", "failed", 3.0)
    metrics.phases({"Installed": 5, "Failed": 1}, PHASES)
    metrics.write()
    metrics.write()  # nothing new: nothing appended
    ops = [json.loads(line) for line in path.read_text().splitlines()]
    observed = [op for op in ops if op["name"] == "ks_installer_module_run_seconds"]
    assert [(o["labels"], o["value"], o["action"]) for o in observed] == [
        ({"module": "monitoring", "action": "install", "outcome": "successful"}, 41.2, "observe"),
        ({"module": "logging", "action": "upgrade", "outcome": "failed"}, 3.0, "observe")]
    assert [o["labels"] for o in ops if o["name"] == "ks_installer_module_failures_total"] == [
        {"module": "logging", "action": "upgrade"}]
    phases = {o["labels"]["phase"]: o["value"] for o in ops if o["name"] == "ks_installer_modules"}
    assert phases == {p: {"Installed": 5, "Failed": 1}.get(p, 0) for p in PHASES}


def test_without_metrics_path_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METRICS_PATH", raising=False)
    metrics = HookMetrics()
    metrics.module_ran("monitoring", "install", "successful", 1.0)
    metrics.write()
    assert list(tmp_path.iterdir()) == []
