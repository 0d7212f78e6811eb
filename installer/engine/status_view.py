"""``python -m installer status`` and ``watch``: the cc's status as a table of modules, once or live.

Read-only: everything comes from the cc (``status.modules``, the conditions), which the reconcile keeps current,
publishing each running module's task every few seconds.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from installer.engine.status import Phase, condition_of
from installer.modules import MODULES

RUNNING = {Phase.INSTALLING: "install", Phase.UPGRADING: "upgrade", Phase.UNINSTALLING: "uninstall"}
STYLE = {Phase.INSTALLED: "green", Phase.FAILED: "bold red", Phase.BLOCKED: "yellow", Phase.INTERRUPTED: "yellow",
         Phase.UNINSTALLED: "dim", **dict.fromkeys(RUNNING, "cyan")}
ORDER = {m.name: i for i, m in enumerate(MODULES)}


def _age(stamp: str | None, now: dt.datetime) -> str:
    if not stamp:
        return ""
    seconds = int((now - dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds())
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{max(seconds, 0)}s"


def finished(cc: dict[str, Any]) -> bool:
    """A reconcile observed the cc's current generation and is no longer running (Ready either way, or Stalled)."""
    status = cc.get("status") or {}
    reconciling = condition_of(status, "Reconciling").get("status")
    current = status.get("observedGeneration") == (cc.get("metadata") or {}).get("generation")
    return current and reconciling != "True"


def summary(cc: dict[str, Any]) -> Text:
    status = cc.get("status") or {}
    ready, reconciling, stalled = (condition_of(status, t) for t in ("Ready", "Reconciling", "Stalled"))
    line = Text()
    line.append(f"Ready: {ready.get('status', 'Unknown')}", "green" if ready.get("status") == "True" else "yellow")
    line.append(f"  Reconciling: {reconciling.get('status', 'Unknown')}  Modules: {status.get('modulesReady', '-')}")
    if ready.get("status") != "True" and ready.get("message"):
        line.append(f"\n{ready.get('reason', '')}: {ready['message']}", "yellow")
    if stalled.get("status") == "True":
        line.append(f"\nStalled ({stalled.get('reason')}): {stalled.get('message')}", "bold red")
    return line


def table(cc: dict[str, Any], now: dt.datetime | None = None, bars: bool = False) -> Table:
    """One row per module the status knows: phase, action, task i/n, time in this phase, message."""
    now = now or dt.datetime.now(dt.UTC)
    modules = (cc.get("status") or {}).get("modules") or {}
    grid = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("MODULE", "PHASE", "ACTION", "TASK", "ELAPSED", *(["PROGRESS"] if bars else []), "MESSAGE"):
        grid.add_column(column, overflow="fold", max_width=70 if column == "MESSAGE" else None)
    for name in sorted(modules, key=lambda n: ORDER.get(n, len(ORDER))):
        mod = modules[name]
        phase = mod.get("phase", "")
        action = RUNNING.get(phase, "")
        index, total = mod.get("task"), mod.get("tasks")
        task = f"{index}/{total}" if action and index is not None and total else (str(index) if action and index
                                                                                  else "")
        message = mod.get("currentTask") if action else (mod.get("message") or "")
        if phase == Phase.FAILED and mod.get("failedTask"):
            message = f"[{mod['failedTask']}] {message}"
        row: list[Any] = [name, Text(phase, STYLE.get(phase, "")), action, task,
                          _age(mod.get("lastTransitionTime"), now)]
        if bars:
            row.append(ProgressBar(total=float(total or 0) or None, completed=float(index or 0), width=20)
                       if action else "")
        grid.add_row(*row, (message or "").splitlines()[0] if message else "")
    return grid


def show(cc: dict[str, Any], console: Console) -> None:
    console.print(summary(cc))
    console.print(table(cc))


def watch(read: Callable[[], dict[str, Any] | None], console: Console, timeout: float, interval: float = 2.0) -> int:
    """Redraw until the reconcile of the current generation finished: 0 if Ready, 1 if not, 2 on timeout."""
    from rich.live import Live

    deadline = time.monotonic() + timeout
    cc = read() or {}
    with Live(Group(summary(cc), table(cc, bars=True)), console=console, refresh_per_second=1,
              transient=False) as live:
        while not finished(cc) and time.monotonic() < deadline:
            time.sleep(interval)
            cc = read() or {}
            live.update(Group(summary(cc), table(cc, bars=True)))
    if not finished(cc):
        console.print(f"still reconciling after {timeout:.0f}s")
        return 2
    return 0 if condition_of(cc.get("status") or {}, "Ready").get("status") == "True" else 1
