"""Execute a plan's runnable steps as a dependency DAG, in parallel up to a cap."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from installer.engine.plan import Plan, Step, launch_priority, run_order
from installer.engine.runner import RunOutcome

log = logging.getLogger("installer")


class Events:
    """What the executor reports; the reconcile turns these into status and log lines."""

    def started(self, step: Step) -> None: ...
    def launched(self) -> None:
        """Called once the steps that could start together have started."""
    def finished(self, step: Step, outcome: RunOutcome) -> None: ...
    def blocked(self, step: Step, because: list[str]) -> None: ...
    def not_started(self, steps: list[Step], why: str) -> None: ...
    def tick(self) -> None:
        """Called about once a second while modules run."""


def execute(plan: Plan, run: Callable[[Step], RunOutcome], events: Events, max_parallel: int = 4,
            stop: Callable[[], bool] | None = None) -> dict[str, RunOutcome]:
    """Run every runnable step once its predecessors succeeded (the console's first, then those with the longest
    chain behind them: :func:`installer.engine.plan.launch_priority`); block the ones whose predecessors did not.
    Once ``stop()`` is true, no further step starts (running ones finish or are cancelled by their runner).

    Callbacks on ``events`` are made from this (the calling) thread only.
    """
    stopping = stop or (lambda: False)
    steps = {s.module: s for s in plan.runnable}
    waiting = run_order(plan)
    priority = launch_priority(waiting)
    outcomes: dict[str, RunOutcome] = {}
    blocked: set[str] = set()
    running: dict[Future[RunOutcome], Step] = {}

    def failed(name: str) -> bool:
        return name in blocked or (name in outcomes and not outcomes[name].ok)

    with ThreadPoolExecutor(max_workers=max(1, max_parallel), thread_name_prefix="module") as pool:
        while waiting or running:
            if waiting and stopping():
                events.not_started([steps[n] for n in waiting], "the installer is stopping")
                waiting.clear()
            for name, before in list(waiting.items()):
                bad = sorted(d for d, blocking in before.items() if blocking and failed(d))
                if bad:
                    del waiting[name]
                    blocked.add(name)
                    events.blocked(steps[name], bad)
            ready = sorted((n for n, before in waiting.items() if all(d in outcomes or d in blocked for d in before)),
                           key=priority.__getitem__)
            launch = ready[: max(0, max_parallel - len(running))]
            for name in launch:
                del waiting[name]
                events.started(steps[name])
                running[pool.submit(_safe_run, run, steps[name])] = steps[name]
            if launch:
                events.launched()
            if not running:
                if waiting:
                    raise RuntimeError(f"dependency cycle among {sorted(waiting)}")
                break
            done, _ = wait(running, timeout=1, return_when=FIRST_COMPLETED)
            events.tick()
            for future in done:
                step = running.pop(future)
                outcomes[step.module] = future.result()
                events.finished(step, outcomes[step.module])
    return outcomes


def _safe_run(run: Callable[[Step], RunOutcome], step: Step) -> RunOutcome:
    try:
        return run(step)
    except Exception as exc:  # a crash in one module must not stop the others
        log.exception("[%s] %s crashed", step.module, step.action.value)
        return RunOutcome(step.module, step.action, False, "error", message=f"{type(exc).__name__}: {exc}")
