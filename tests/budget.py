"""The suite's per-test budget: a test (setup and call) over it fails unless marked ``@pytest.mark.slow(reason=...)``.

A wall-clock ceiling fails a run when the machine is slow or shared, so the budget is judged on two measures:

- **CPU**: the CPU seconds the test's worker and everything it started spent during the test (its engine runs,
  Ansible, kubectl and helm, and the worker's own simulated cluster), read from a cpuacct cgroup of the worker's own
  (``/proc`` of the worker's process tree where no cgroup can be made). CPU seconds do not stretch when other
  processes take the cores or the host steals time, so this is the rule that catches a test that grew. It may use
  ``KS_TEST_CEILING`` x the machine's CPU-speed factor (a fixed job's CPU time / its time on the reference machine,
  at least 1).
- **Wall**: waiting (polls, timeouts) costs no CPU, so the wall time is bounded too, by ``KS_TEST_CEILING`` x the
  machine's slowdown over the test's span: every ``SAMPLE_EVERY`` seconds a fixed CPU-bound job runs in a process
  of its own, and its wall time / its CPU time on the reference machine (at least 1) is how much slower than an idle
  reference machine any task runs at that moment; the test gets the median of the samples taken while it ran (and one
  taken when it ends). ``KS_TEST_SLOWDOWN`` sets the factor instead of measuring it.

On an idle machine both factors are about 1, so a test slowed on purpose (by work or by waiting) fails at the ceiling.
"""

from __future__ import annotations

import contextlib
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CEILING_SECONDS = float(os.environ.get("KS_TEST_CEILING", "300"))
SAMPLE_EVERY = 15.0
# The calibration job: a fixed loop, timed inside its own process (the interpreter's start is not measured).
CALIBRATION = """
import time
c, w = time.process_time(), time.perf_counter()
x = 0
for i in range(1_000_000):
    x += i * i
print(time.process_time() - c, time.perf_counter() - w)
"""
# Its CPU time on the project's two-core reference machine (the lowest of repeated runs): a faster machine counts as 1.
REFERENCE_CPU_SECONDS = 0.13
_START = pytest.StashKey["Span"]()
_SETUP = pytest.StashKey[float]()


def calibrate() -> tuple[float, float]:
    """(wall, CPU) seconds of the calibration job run now."""
    out = subprocess.run([sys.executable, "-S", "-c", CALIBRATION], capture_output=True, text=True, check=True,
                         timeout=600).stdout.split()
    return float(out[1]), float(out[0])


class CpuMeter:
    """CPU seconds spent by this process and every process it started since ``__init__``."""

    def __init__(self) -> None:
        self.group = _own_cgroup()

    def seconds(self) -> float:
        if self.group is not None:
            try:
                return _cgroup_cpu(self.group)
            except OSError:
                self.group = None
        return _tree_cpu(os.getpid())

    def close(self) -> None:
        """Back to the parent cgroup; the own one is removed once empty (a later run removes what stayed)."""
        if self.group is None:
            return
        try:
            (self.group.parent / "cgroup.procs").write_text(str(os.getpid()))
            self.group.rmdir()
        except OSError:
            pass


def _own_cgroup() -> Path | None:
    """A cgroup of this process's own (cgroup v1 cpuacct, or v2), that its children inherit; None if not allowed."""
    for root, controller in (("/sys/fs/cgroup/cpuacct", "cpuacct"), ("/sys/fs/cgroup/unified", ""),
                             ("/sys/fs/cgroup", "")):
        current = _cgroup_path(controller)
        parent = Path(root) / (current or "").lstrip("/")
        if current is None or not (parent / "cgroup.procs").exists():
            continue
        for stale in parent.glob("ks-test-*"):  # left by a run that was killed
            if not Path("/proc", stale.name.removeprefix("ks-test-")).exists():
                with contextlib.suppress(OSError):
                    stale.rmdir()
        group = parent / f"ks-test-{os.getpid()}"
        try:
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
            _cgroup_cpu(group)
            return group
        except (OSError, KeyError, ValueError):
            with contextlib.suppress(OSError):
                group.rmdir()
    return None


def _cgroup_path(controller: str) -> str | None:
    """This process's cgroup in the hierarchy of ``controller`` ('' for the unified one)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller and controller in controllers.split(",")) or (not controller and controllers == ""):
            return path
    return None


def _cpu_file(group: Path) -> Path:
    return group / "cpuacct.usage" if (group / "cpuacct.usage").exists() else group / "cpu.stat"


def _cgroup_cpu(group: Path) -> float:
    path = _cpu_file(group)
    text = path.read_text()
    if path.name == "cpuacct.usage":
        return int(text) / 1e9
    return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6


def _tree_cpu(root: int) -> float:
    """This process, its reaped children and every live descendant (with the children they reaped)."""
    total = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                for f in ("ru_utime", "ru_stime"))
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(v) for v in fields[11:15])
    descendants, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - descendants
        descendants |= frontier
    return total + sum(times[pid] for pid in descendants) / tick


class Slowdown:
    """Samples of how much slower than the reference machine a task runs, taken in the background."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (monotonic time, factor)
        self.cpu_factors: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if "KS_TEST_SLOWDOWN" in os.environ or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="ks-test-slowdown", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample()

    def sample(self) -> float:
        """Run the calibration job now; record and return its factor."""
        wall, cpu = calibrate()
        factor = max(1.0, wall / REFERENCE_CPU_SECONDS)
        self.samples.append((time.monotonic(), factor))
        self.cpu_factors.append(max(1.0, cpu / REFERENCE_CPU_SECONDS))
        return factor

    def over(self, start: float, end: float) -> float:
        """The median factor of the samples taken from ``start`` to ``end``, with one more taken now."""
        if "KS_TEST_SLOWDOWN" in os.environ:
            return float(os.environ["KS_TEST_SLOWDOWN"])
        now = self.sample()
        return statistics.median([f for t, f in self.samples if start <= t <= end] + [now])

    def cpu_speed(self) -> float:
        """The median CPU-speed factor sampled so far (1 on the reference machine or a faster one)."""
        if "KS_TEST_SLOWDOWN" in os.environ:
            return 1.0
        if not self.cpu_factors:
            self.sample()
        return statistics.median(self.cpu_factors)


class Span:
    """Where a test's budget starts: the monotonic time and the CPU meter's reading."""

    def __init__(self, meter: CpuMeter) -> None:
        self.wall = time.monotonic()
        self.cpu = meter.seconds()


class Budget:
    """The pytest plugin: measures each test and fails the one over its budget."""

    def __init__(self) -> None:
        self.meter = CpuMeter()
        self.slowdown = Slowdown()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.slowdown.start()
        item.stash[_START] = Span(self.meter)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if report.when == "setup":
            item.stash[_SETUP] = report.duration
            return
        if report.when != "call" or not report.passed or _START not in item.stash:
            return
        span = item.stash[_START]
        wall = item.stash.get(_SETUP, 0.0) + report.duration
        cpu = self.meter.seconds() - span.cpu
        report.user_properties.append(("budget", {"wall": round(wall, 1), "cpu": round(cpu, 1)}))
        slow = item.get_closest_marker("slow")
        if slow is not None:
            if not slow.kwargs.get("reason"):
                report.outcome = "failed"
                report.longrepr = "marked slow without a reason: @pytest.mark.slow(reason=...)"
            return
        verdict = self.verdict(span, wall, cpu)
        if verdict:
            report.outcome, report.longrepr = "failed", verdict

    def verdict(self, span: Span, wall: float, cpu: float) -> str:
        """Why the test is over its budget, or '' when it is within."""
        advice = "make it cheaper, or mark it @pytest.mark.slow(reason=...)"
        if cpu > CEILING_SECONDS:
            speed = self.slowdown.cpu_speed()
            if cpu > CEILING_SECONDS * speed:
                return (f"used {cpu:.0f} CPU-s (setup and call, its processes and its cluster's), over the suite's "
                        f"{CEILING_SECONDS:g}s ceiling (KS_TEST_CEILING) x this machine's CPU-speed factor "
                        f"{speed:.2f}: {advice}")
        if wall > CEILING_SECONDS:
            factor = self.slowdown.over(span.wall, time.monotonic())
            if wall > CEILING_SECONDS * factor:
                return (f"took {wall:.0f}s (setup and call), over the suite's {CEILING_SECONDS:g}s ceiling "
                        f"(KS_TEST_CEILING) x the machine's slowdown while it ran {factor:.2f}: {advice}")
        return ""

    def pytest_unconfigure(self) -> None:
        self.slowdown.stop()
        self.meter.close()


def configure(config: pytest.Config) -> None:
    """Register the budget in the process that runs the tests (called from tests/conftest.py)."""
    config.addinivalue_line("markers", "slow(reason): allowed past the suite's per-test budget, for the reason given")
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None) \
            and config.getoption("dist", "no") != "no":
        return  # the xdist controller runs no test: its workers measure
    config.pluginmanager.register(Budget(), "ks-budget")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The tests that used the most CPU (``KS_BUDGET_SHOWN`` of them, 10 unless set), beside pytest's slowest
    (``--durations``)."""
    measured = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == "budget":
                    measured.append((value["cpu"], value["wall"], report.nodeid))
    if not measured:
        return
    terminalreporter.write_sep("=", f"budget: most CPU (ceiling {CEILING_SECONDS:g}s)")
    for cpu, wall, nodeid in sorted(measured, reverse=True)[:int(os.environ.get("KS_BUDGET_SHOWN", "10"))]:
        terminalreporter.write_line(f"{cpu:8.1f} CPU-s {wall:8.1f}s wall  {nodeid}")
