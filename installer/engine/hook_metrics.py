"""Prometheus metrics through shell-operator: operations appended to ``$METRICS_PATH`` as JSON lines.

shell-operator serves them on its /metrics port with a ``hook`` label. Without ``$METRICS_PATH`` (the CLI,
tests) nothing is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RUN_SECONDS = "ks_installer_module_run_seconds"
RUNS = "ks_installer_module_runs_total"
FAILURES = "ks_installer_module_failures_total"
PHASES = "ks_installer_modules"
BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1200]


class HookMetrics:
    """Collects metric operations during a reconcile and writes them once at its end."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path if path is not None else os.environ.get("METRICS_PATH")
        self.ops: list[dict[str, Any]] = []

    def module_ran(self, module: str, action: str, outcome: str, seconds: float) -> None:
        labels = {"module": module, "action": action}
        self.ops.append({"name": RUN_SECONDS, "action": "observe", "value": round(seconds, 3), "buckets": BUCKETS,
                         "labels": {**labels, "outcome": outcome}})
        self.ops.append({"name": RUNS, "action": "add", "value": 1, "labels": {**labels, "outcome": outcome}})
        if outcome == "failed":
            self.ops.append({"name": FAILURES, "action": "add", "value": 1, "labels": labels})

    def phases(self, counts: dict[str, int], all_phases: list[str]) -> None:
        """How many modules are in each phase now (every phase set, so one that emptied reads 0)."""
        for phase in all_phases:
            self.ops.append({"name": PHASES, "action": "set", "value": counts.get(phase, 0),
                             "labels": {"phase": phase}})

    def write(self) -> None:
        if not self.path or not self.ops:
            return
        with Path(self.path).open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(op) + "\n" for op in self.ops)
        self.ops = []
