"""The reconcile timeline: task spans from ansible-runner events, timeline.json, and the Gantt picture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from installer.cli import main
from installer.engine import timeline
from installer.engine.runner import _Progress


def _event(kind: str, created: str, **data: object) -> dict:
    return {"event": kind, "created": created, "event_data": data}


def test_task_spans_follow_the_runner_events() -> None:
    progress = _Progress("monitoring")
    for event in (
        _event("playbook_on_task_start", "2026-11-24T01:00:00.000000", task="Apply the stack"),
        _event("runner_on_ok", "2026-11-24T01:00:04.500000", task="Apply the stack", res={"changed": True}),
        _event("playbook_on_task_start", "2026-11-24T01:00:04.600000", task="Look up a thing"),
        _event("runner_on_failed", "2026-11-24T01:00:05.000000", task="Look up a thing", ignore_errors=True, res={}),
        _event("playbook_on_task_start", "2026-11-24T01:00:05.100000", task="Wait for Prometheus"),
        _event("runner_on_failed", "2026-11-24T01:00:09.000000", task="Wait for Prometheus", res={"msg": "timeout"}),
    ):
        progress(event)
    assert [(s["task"], s["outcome"], s["start"][-9:], s["end"][-9:]) for s in progress.spans] == [
        ("Apply the stack", "changed", "00.000000", "04.500000"),
        ("Look up a thing", "ok", "04.600000", "05.000000"),
        ("Wait for Prometheus", "failed", "05.100000", "09.000000")]
    assert progress.failed_task == "Wait for Prometheus" and progress.message == "timeout"


def test_the_timeline_is_drawn_with_modules_as_rows_and_failures_named(tmp_path: Path) -> None:
    tasks = [{"task": "Apply", "start": "2026-11-24T01:00:01", "end": "2026-11-24T01:00:20", "outcome": "changed"},
             {"task": "Wait for Deployment x", "start": "2026-11-24T01:00:20", "end": "2026-11-24T01:00:30",
              "outcome": "failed"}]
    modules = [{"module": "preinstall", "action": "install", "outcome": "successful",
                "start": "2026-11-24T01:00:00", "end": "2026-11-24T01:00:05+00:00", "tasks": tasks[:1]},
               {"module": "monitoring", "action": "upgrade", "outcome": "failed",
                "start": "2026-11-24T01:00:01", "end": "2026-11-24T01:00:31", "tasks": tasks}]
    path = timeline.write(tmp_path, 7, "2026-11-24T01:00:00", modules)
    assert json.loads(path.read_text())["modules"][1]["tasks"][1]["outcome"] == "failed"
    svg = tmp_path / "run.svg"
    assert main(["timeline", str(tmp_path), "-o", str(svg)]) == 0
    text = svg.read_text()
    for label in ("preinstall (install)", "monitoring (upgrade)", "Wait for Deployment x", "generation 7"):
        assert label in text, label


def test_no_timeline_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", str(tmp_path), "-o", str(tmp_path / "x.png")]) == 2
    assert "no timeline" in capsys.readouterr().err
