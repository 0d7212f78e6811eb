#!/usr/bin/env python3
"""Benchmark: what a no-op edit costs compared with re-running every module, on the simulated cluster.

Runs the hook (hooks/kubesphere/installRunner.py, as shell-operator would) against a fresh simulated cluster
with the default cc: one first install, then N no-op reconciles (the spec is unchanged), then N forced full
reconciles (`python -m installer reconcile --all`, every enabled module re-run as the original installer
did on every edit). Prints the median wall times and their ratio.

    .venv/bin/python hack/bench.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from simcluster import SimCluster

REPO = Path(__file__).resolve().parents[1]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, SimCluster(Path(tmp) / "cluster",
                                                                              die_with_parent=True) as cluster:
        base = Path(tmp) / "kubesphere"
        env = {**os.environ, **cluster.env(), "KS_BASE_DIR": str(base)}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "kubesphere-installer.yaml"))
        cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "cluster-configuration.yaml"))
        first, log = timed([sys.executable, str(HOOK)], env)
        print(f"first install (hook):      {first:7.2f}s  modules run: {ran(log)}")
        noop, full = [], []
        for _ in range(args.rounds):
            seconds, log = timed([sys.executable, str(HOOK)], env)
            assert ran(log) == 0, f"a no-op reconcile ran modules:\n{log}"
            noop.append(seconds)
            seconds, log = timed([sys.executable, "-m", "installer", "reconcile", "--all"], env)
            full.append(seconds)
            modules = ran(log)
        no_op, forced = statistics.median(noop), statistics.median(full)
        print(f"no-op reconcile (hook):    {no_op:7.2f}s  median of {args.rounds}, modules run: 0")
        print(f"forced full reconcile:     {forced:7.2f}s  median of {args.rounds}, modules run: {modules}")
        print(f"ratio no-op / full:        {no_op / forced:7.3f}  (full run is {forced / no_op:.1f}x the no-op)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
