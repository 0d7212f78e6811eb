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
5. ``--scale 3,100,500``: the same cluster grown to each node count (kwok Nodes with InternalIPs in
   :data:`SCALE_NODES`, a range the bench routes to this machine's loopback for its run, so local by construction)
   with ``--namespaces`` extra namespaces (2,000 by default): per size the no-op event, the schedule tick, the
   drift check of every installed module and a one-module toggle, and each against the smallest size (goal <=
   1.2x).

    .venv/bin/python hack/bench.py [--rounds 3] [--module metrics_server]
    .venv/bin/python hack/bench.py --scale 3,100,500 [--namespaces 2000]
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

from simcluster import SimCluster, add_local_route, node_manifest, remove_local_route, versions

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from installer.hook import SCHEDULE_BINDING, SPEC_BINDING, STATE_BINDING  # noqa: E402
from installer.modules import by_name  # noqa: E402
from installer.settings import NAMESPACE, STATE_SECRET  # noqa: E402
from installer.spec import nested  # noqa: E402

HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"
SCALE_NODES = "172.30.0.0/16"
"""The extra Nodes' InternalIPs (not loopback's 127/8: an Endpoints address may not be a loopback one)."""


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

    @classmethod
    def installed(cls, cluster: SimCluster, base: Path) -> Bench:
        """A bench on ``cluster`` with the installer manifest's CRD and the default cc applied (nothing run yet)."""
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "kubesphere-installer.yaml"))
        cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "cluster-configuration.yaml"))
        return cls(cluster, base)

    def noop_edit(self, round_: int) -> float:
        """An edit that changes no input (the default written out, then removed again: a new generation each),
        settled from the snapshots; its seconds."""
        self.patch({"common": {"redis": {"volumeSize": None if round_ % 2 else "2Gi"}}})
        seconds, log = self.hook(SPEC_BINDING)
        assert ran(log) == 0 and "Settled from shell-operator's snapshots" in log, log
        return seconds

    def timeline(self) -> dict[str, Any]:
        return json.loads((self.base / "results" / "timeline.json").read_text())


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (a median needs a round); got {value}")
    return value


def grow(bench: Bench, nodes: int, namespaces: int) -> None:
    """Add kwok Nodes up to ``nodes`` (InternalIPs in :data:`SCALE_NODES`) and ``namespaces`` empty namespaces."""
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(str(bench.cluster.kubeconfig)))
    have = {n.metadata.name for n in core.list_node().items}
    kubelet = versions()["KUBERNETES_VERSION"]
    for i in range(len(have), nodes):
        name = f"scale-node-{i:04d}"
        if name not in have:
            node = node_manifest(name, f"172.30.{i // 250}.{i % 250 + 1}", False, kubelet)
            # Only what tolerates every taint (DaemonSets like node-exporter) runs there: a Deployment's pods stay
            # on the cluster's own nodes, where the simulated backends (metrics-server's API) listen.
            node["spec"] = {"taints": [{"key": "ks-bench/scale", "value": "true", "effect": "NoSchedule"}]}
            core.create_node(node)
    deadline = time.monotonic() + 300
    while sum(any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
              for n in core.list_node().items) < nodes:  # the node count is an input (replicas follow it)
        if time.monotonic() > deadline:
            raise SystemExit(f"the {nodes} nodes did not become Ready in 300s")
        time.sleep(1)
    existing = {n.metadata.name for n in core.list_namespace().items}
    for i in range(namespaces):
        if (name := f"scale-ns-{i:04d}") not in existing:
            core.create_namespace({"metadata": {"name": name}})


def scale(args: argparse.Namespace) -> int:
    """Per cluster size: no-op event, schedule tick, drift check and toggle, and their ratio to the first size."""
    sizes = [int(n) for n in args.scale.split(",")]
    if not add_local_route(SCALE_NODES):
        raise SystemExit(f"cannot route {SCALE_NODES} to this machine (needs CAP_NET_ADMIN): no node may be off it")
    try:
        return _scale(args, sizes)
    finally:
        remove_local_route(SCALE_NODES)


def _scale(args: argparse.Namespace, sizes: list[int]) -> int:
    figures: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, SimCluster(Path(tmp) / "cluster",
                                                                              die_with_parent=True) as cluster:
        bench = Bench.installed(cluster, Path(tmp) / "kubesphere")
        bench.hook()
        switch = by_name()[args.module].enabled.paths[0]
        for size in sizes:
            grow(bench, size, args.namespaces if size != sizes[0] else 0)
            bench.hook()  # settle whatever the growth changed (none of the installer's inputs)
            noop, tick, drift, toggle = [], [], [], []
            for i in range(args.rounds):
                noop.append(bench.noop_edit(i))
                tick.append(bench.hook(SCHEDULE_BINDING)[0])
                seconds, log = timed([sys.executable, "-m", "installer", "reconcile", "--check-drift"], bench.env)
                assert ran(log) == 0, log
                drift.append(seconds)
                bench.patch(nested(switch, True))
                seconds, log = bench.hook()
                assert ran(log) == 1, log
                toggle.append(seconds)
                bench.patch(nested(switch, False))
                bench.hook()
            figures[size] = {"no-op event": statistics.median(noop), "schedule tick": statistics.median(tick),
                             "drift check": statistics.median(drift),
                             f"toggle {args.module}": statistics.median(toggle)}
            print(f"{size} nodes: " + ", ".join(f"{k} {v:.3f}s" for k, v in figures[size].items()), flush=True)
    base = figures[sizes[0]]
    print(f"\n{'figure':<24}" + "".join(f"{s:>10} nodes" for s in sizes) + "   ratio (goal <= 1.2)")
    for key in base:
        ratio = figures[sizes[-1]][key] / base[key]
        print(f"{key:<24}" + "".join(f"{figures[s][key]:15.3f}" for s in sizes) + f"   {ratio:.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=_positive, default=3)
    parser.add_argument("--module", default="metrics_server", help="module to switch on for the toggle figure")
    parser.add_argument("--scale", help="node counts, e.g. 3,100,500: the cluster-size figures instead")
    parser.add_argument("--namespaces", type=int, default=2000, help="extra namespaces beyond the first size")
    args = parser.parse_args()
    if args.scale:
        return scale(args)
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, SimCluster(Path(tmp) / "cluster",
                                                                              die_with_parent=True) as cluster:
        bench = Bench.installed(cluster, Path(tmp) / "kubesphere")

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
            noop.append(bench.noop_edit(i))
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
