"""python -m installer status / watch: the table users read from the cc's status."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.console import Console

from installer.engine import status_view

NOW = dt.datetime(2026, 11, 24, 2, 0, 0, tzinfo=dt.UTC)


def cc(generation: int = 3, observed: int = 3, reconciling: str = "True", ready: str = "False") -> dict[str, Any]:
    return {"metadata": {"generation": generation}, "status": {
        "observedGeneration": observed, "modulesReady": "3/5",
        "conditions": [{"type": "Ready", "status": ready, "reason": "ModulesPending", "message": "not installed: x"},
                       {"type": "Reconciling", "status": reconciling}],
        "modules": {
            "monitoring": {"phase": "Upgrading", "task": 7, "tasks": 20, "currentTask": "Monitoring | Wait",
                           "lastTransitionTime": "2026-11-24T01:58:30Z"},
            "ks-core": {"phase": "Installed", "lastTransitionTime": "2026-11-24T01:00:00Z"},
            "logging": {"phase": "Failed", "failedTask": "Logging | Apply", "message": "Unsupported value\nmore",
                        "lastTransitionTime": "2026-11-24T01:59:50Z"},
            "preinstall": {"phase": "Installed", "lastTransitionTime": "2026-11-24T01:00:00Z"}}}}


def render(renderable: Any) -> str:
    console = Console(record=True, width=200)
    console.print(renderable)
    return console.export_text()


def test_rows_follow_the_registry_order_with_progress_and_messages() -> None:
    text = render(status_view.table(cc(), NOW))
    lines = [line.split() for line in text.splitlines()[1:] if line.strip()]
    assert [line[0] for line in lines] == ["preinstall", "ks-core", "monitoring", "logging"]
    monitoring = next(line for line in text.splitlines() if line.startswith("monitoring"))
    assert "Upgrading" in monitoring and "upgrade" in monitoring and "7/20" in monitoring
    assert "1m30s" in monitoring and "Monitoring | Wait" in monitoring
    failed = next(line for line in text.splitlines() if line.startswith("logging"))
    assert "[Logging | Apply] Unsupported value" in failed and "more" not in failed


def test_summary_names_what_is_not_ready() -> None:
    text = render(status_view.summary(cc()))
    assert "Ready: False" in text and "Reconciling: True" in text and "Modules: 3/5" in text
    assert "ModulesPending: not installed: x" in text


def test_finished_needs_the_current_generation_and_no_running_reconcile() -> None:
    assert not status_view.finished(cc())
    assert not status_view.finished(cc(generation=4, observed=3, reconciling="False"))
    assert status_view.finished(cc(reconciling="False"))


def test_watch_returns_when_the_reconcile_finishes() -> None:
    states = iter([cc(), cc(reconciling="False", ready="True")])
    console = Console(record=True, width=200)
    assert status_view.watch(lambda: next(states), console, timeout=30, interval=0) == 0
    assert "Ready: True" in console.export_text()


def test_watch_gives_up_at_the_timeout() -> None:
    assert status_view.watch(cc, Console(record=True, width=200), timeout=0, interval=0) == 2
