#!/usr/bin/env python3
"""Benchmark: what the installer's reconciles cost on the simulated cluster, every figure as a ratio.

On a fresh simulated cluster with the default cc, through the hook (hooks/kubesphere/installRunner.py) as
shell-operator runs it:

1. no-op: an event that changes nothing, settled from shell-operator's snapshots (the hook gets the cc and its
   state Secret as shell-operator passes them), against a forced full reconcile (`reconcile --all`, every
   enabled module re-run, as the original installer did on every edit). Also the schedule tick.
2. one-module toggle: switching a module on, reconcile wall time against that module's playbook run alone.
3. full install against the critical path of the module DAG (each module's measured duration, from the run's
   timeline), and when the welcome box appeared against when the slowest module finished.
4. per module: the Ansible overhead, playbook wall time minus the time its tasks took.

    .venv/bin/python hack/bench.py [--rounds 3] [--module metrics_server]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from simcluster import SimCluster

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from installer.hook import SCHEDULE_BINDING, SPEC_BINDING, STATE_BINDING  # noqa: E402
from installer.modules import by_name  # noqa: E402
from installer.settings import NAMESPACE, STATE_SECRET  # noqa: E402
from installer.spec import nested  # noqa: E402

HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800, check=False)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed, proc.stderr


def ran(log: str) -> int:
    return sum(1 for line in log.splitlines() if line.startswith("task ") and " status is " in line)


def at(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp)


def span(item: dict[str, Any]) -> float:
    return (at(item["end"]) - at(item["start"])).total_seconds()


def critical_path(modules: list[dict[str, Any]]) -> float:
    """Longest chain of measured module durations along the registry's install order (among the modules run)."""
    took = {m["module"]: span(m) for m in modules}
    finish: dict[str, float] = {}

    def done(name: str) -> float:
        if name not in finish:
            module = by_name()[name]
            before = [done(d) for d in module.depends + module.requires + module.after if d in took]
            finish[name] = max(before, default=0.0) + took[name]
        return finish[name]

    return max(done(n) for n in took)


class Bench:
    def __init__(self, cluster: SimCluster, base: Path) -> None:
        self.cluster, self.base = cluster, base
        self.env = {**os.environ, **cluster.env(), "KS_BASE_DIR": str(base)}
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env['PATH']}"

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return json.loads(self.cluster.kubectl("get", kind, name, "-n", NAMESPACE, "-o", "json").stdout)

    def hook(self, binding: str | None = None) -> tuple[float, str]:
        """The hook as shell-operator runs it: with a binding context carrying the snapshots, and a patch file."""
        env = dict(self.env)
        if binding:
            context = [{"binding": binding, "snapshots": {
                SPEC_BINDING: [{"object": self.get("cc", "ks-installer")}],
                STATE_BINDING: [{"object": self.get("secret", STATE_SECRET)}]}}]
            path = self.base.parent / "context.json"
            path.write_text(json.dumps(context))
            env.update(BINDING_CONTEXT_PATH=str(path), KUBERNETES_PATCH_PATH=str(self.base.parent / "patch.jsonl"))
        return timed([sys.executable, str(HOOK)], env)

    def patch(self, spec: dict[str, Any]) -> None:
        self.cluster.kubectl("patch", "cc", "ks-installer", "-n", NAMESPACE, "--type=merge", "-p",
                             json.dumps({"spec": spec}))

    def timeline(self) -> dict[str, Any]:
        return json.loads((self.base / "results" / "timeline.json").read_text())


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (a median needs a round); got {value}")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=_positive, default=3)
    parser.add_argument("--module", default="metrics_server", help="module to switch on for the toggle figure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, SimCluster(Path(tmp) / "cluster",
                                                                              die_with_parent=True) as cluster:
        bench = Bench(cluster, Path(tmp) / "kubesphere")
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "kubesphere-installer.yaml"))
        cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "cluster-configuration.yaml"))

        first, log = bench.hook()
        install = bench.timeline()
        print(f"first install (hook):        {first:7.2f}s  modules run: {ran(log)}")
        path = critical_path(install["modules"])
        print(f"  critical path of the DAG:  {path:7.2f}s  ratio install / critical path: {first / path:.2f}"
              "  (goal <= 1.1)")
        started = at(install["start"])
        welcome = dt.datetime.fromtimestamp((bench.base / "playbooks" / "kubesphere_running").stat().st_mtime, dt.UTC)
        ends = ", ".join(f"{m['module']} {(at(m['end']) - started).total_seconds():.1f}s"
                         for m in sorted(install["modules"], key=lambda m: m["end"]))
        print(f"  welcome box at {(welcome - started).total_seconds():.1f}s; modules finished at: {ends}")
        print("  ansible overhead per module (playbook wall - time in tasks):")
        for module in sorted(install["modules"], key=lambda m: m["start"]):
            tasks = sum(span(t) for t in module["tasks"])
            print(f"    {module['module']:<16} {span(module):6.2f}s wall, {tasks:6.2f}s in "
                  f"{len(module['tasks'])} tasks, overhead {span(module) - tasks:5.2f}s")

        noop, tick, slow, full = [], [], [], []
        for i in range(args.rounds):
            # An edit that changes no input: the default written out, then removed again (a new generation each).
            bench.patch({"common": {"redis": {"volumeSize": None if i % 2 else "2Gi"}}})
            seconds, log = bench.hook(SPEC_BINDING)
            assert ran(log) == 0 and "Settled from shell-operator's snapshots" in log, log
            noop.append(seconds)
            tick.append(bench.hook(SCHEDULE_BINDING)[0])
            seconds, log = bench.hook()
            assert ran(log) == 0, log
            slow.append(seconds)
            seconds, log = timed([sys.executable, "-m", "installer", "reconcile", "--all"], bench.env)
            full.append(seconds)
            modules = ran(log)
        no_op, forced = statistics.median(noop), statistics.median(full)
        print(f"no-op edit (hook, snapshots): {no_op:6.3f}s  median of {args.rounds}  (goal <= 0.2s)")
        print(f"schedule tick, nothing due:   {statistics.median(tick):6.3f}s")
        print(f"no-op without snapshots:      {statistics.median(slow):6.3f}s  (the full path: API reads, plan)")
        print(f"forced full reconcile:        {forced:6.2f}s  modules run: {modules}")
        print(f"ratio full / no-op:           {forced / no_op:6.1f}x  (goal >= 100)")

        switch = by_name()[args.module].enabled.paths[0]  # e.g. metrics_server.enabled
        bench.patch(nested(switch, True))
        seconds, log = bench.hook()
        toggled = next(m for m in bench.timeline()["modules"] if m["module"] == args.module)
        print(f"toggle {args.module} on:  {seconds:6.2f}s reconcile; its playbook {span(toggled):6.2f}s; "
              f"ratio {seconds / span(toggled):.2f}  (goal <= 1.15); modules run: {ran(log)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
