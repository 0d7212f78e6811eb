"""The timeline of a reconcile: ``<results>/timeline.json`` and its picture (a Gantt chart of modules and tasks).

Every reconcile that runs a module writes the file (a reconcile with nothing to do keeps the last one).
Drawing needs matplotlib, an optional extra (``pip install 'ks-installer[timeline]'``), so the image stays small.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

FILE = "timeline.json"
COLOURS = {"ok": "#4c9be8", "changed": "#2e7d32", "skipped": "#b0bec5", "failed": "#d32f2f", "running": "#ffb300"}
MODULE_COLOURS = {"successful": "#e3f2fd", "failed": "#ffebee", "interrupted": "#fff8e1"}


def now_iso() -> str:
    """UTC with offset, as ansible-runner stamps its events."""
    return dt.datetime.now(dt.UTC).isoformat()


def write(results_dir: Path, generation: int | None, started: str, modules: list[dict[str, Any]]) -> Path:
    path = results_dir / FILE
    results_dir.mkdir(parents=True, exist_ok=True)
    body = {"generation": generation, "start": started, "end": now_iso(), "modules": modules}
    path.write_text(json.dumps(body, indent=1))
    return path


def load(path: Path) -> dict[str, Any]:
    """A timeline file, or the one in a results directory."""
    path = path / FILE if path.is_dir() else path
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no timeline (a reconcile that runs a module writes one)") from None


def _parse(stamp: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(stamp)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _seconds(stamp: str | None, origin: dt.datetime) -> float:
    return (_parse(stamp) - origin).total_seconds() if stamp else 0.0


def draw(timeline: dict[str, Any], out: Path) -> Path:
    """A Gantt chart: one row per module (its span shaded by outcome), its tasks as segments coloured by outcome,
    failed tasks labelled. The format follows ``out``'s suffix (svg, png, pdf)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise RuntimeError("drawing the timeline needs matplotlib: pip install 'ks-installer[timeline]'") from None
    origin = _parse(timeline["start"])
    modules = sorted(timeline["modules"], key=lambda m: m["start"])
    fig, ax = plt.subplots(figsize=(11, 0.55 * len(modules) + 1.6))
    for row, module in enumerate(modules):
        start, end = _seconds(module["start"], origin), _seconds(module["end"], origin)
        ax.barh(row, max(end - start, 0.2), left=start, height=0.8,
                color=MODULE_COLOURS.get(module["outcome"], "#eeeeee"), edgecolor="#90a4ae")
        for task in module.get("tasks", []):
            t0, t1 = _seconds(task["start"], origin), _seconds(task["end"], origin)
            ax.barh(row, max(t1 - t0, 0.05), left=t0, height=0.5, color=COLOURS.get(task["outcome"], "#9e9e9e"))
            if task["outcome"] == "failed":
                ax.annotate(task["task"][:60], (t1, row), xytext=(4, -3), textcoords="offset points", fontsize=7,
                            color=COLOURS["failed"])
    ax.set_yticks(range(len(modules)), [f"{m['module']} ({m['action']})" for m in modules])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the reconcile started")
    total = _seconds(timeline["end"], origin)
    ax.set_title(f"ks-installer reconcile of generation {timeline.get('generation')}: {total:.0f}s", fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items() if k != "running"], loc="lower right",
              fontsize=7, ncols=4)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
