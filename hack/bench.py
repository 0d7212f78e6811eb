#!/usr/bin/env python3
"""Benchmark: what the installer's reconciles cost on the simulated cluster, every figure as a ratio.

On a fresh simulated cluster with the default cc, through the hook (hooks/kubesphere/installRunner.py) as
shell-operator runs it:

1. no-op: an event that changes nothing, settled from shell-operator's snapshots (the hook gets the cc and its
   state Secret as shell-operator passes them), against the first install in the same run, and against a forced
   full reconcile (`reconcile --all`, every enabled module re-run, as the original installer did on every edit).
   Also the schedule tick, and an interpreter's start for scale. Each figure in wall seconds and in CPU seconds (the
   hook and every process under it: what the run itself did, which other work on the machine hardly changes).
2. one-module toggle: switching a module on (median of ``--rounds``, switched off again between them), reconcile
   wall time against that module's playbook run alone.
3. full install against the critical path of the module DAG (each module's measured duration, from the run's
   timeline), and when the welcome box appeared against when the slowest module finished.
4. per module: the Ansible overhead, playbook wall time minus the time its tasks took.
5. ``--scale 3,100,500``: the same cluster grown to each node count (kwok Nodes with InternalIPs in
   :data:`SCALE_NODES`, a range the bench routes to this machine's loopback for its run, so local by construction)
   with ``--namespaces`` extra namespaces (2,000 by default): per size the no-op event, the schedule tick, the
   drift check of every installed module and a one-module toggle, and each against the smallest size (goal <=
   1.2x).
6. ``--all-components``: every module that has a switch switched on, from the registry (a switch path set to true,
   or to :data:`CHOICES`' value, until the module is on). On one fresh cluster: the default install, then every
   component in one edit and one hook run: its wall against the critical path of the modules run (and which
   chain that is), and per module where its playbook's time went: Ansible start-up (run start to first task), task
   time by kind (:func:`task_kind`: readiness waits, applies, renders, other, skipped), the rest (between tasks),
   and how long it queued once its dependencies had finished; the CPU seconds of the hook's tree and of the
   cluster's processes. Meanwhile the memory of the hook's process tree (:class:`TreeMemory`: the engine alone,
   each module's Ansible run, the whole tree) against the installer pod's limit. On a second fresh cluster: an
   install with every component on from the start, and when its console was ready (the welcome box) against the
   default install's. ``--leave-off`` keeps some modules off (what one of them costs the others); the telemetry
   module reports to a receiver on loopback.
7. ``--compare-v341-order`` (with ``--latency probes``: the simulated clusters' latency model, where pods are Ready
   after their image pulls and probes' delays): fresh installs of the default cc and of every component on, each by
   this installer's schedule and by v3.4.1's order (``hack/v341_order.py``: the same hook, v3.4.1's phases imposed
   on the executor's order), each on a fresh cluster and run once: ConsoleReady (the cc's condition: ks-apiserver
   and ks-console Available, watched from the bench), the welcome box and Ready from the hook's launch, as ratios
   ours / v3.4.1's order; each install against its critical path; per module what held it back.

    .venv/bin/python hack/bench.py [--rounds 3] [--module metrics_server]
    .venv/bin/python hack/bench.py --scale 3,100,500 [--namespaces 2000]
    .venv/bin/python hack/bench.py --all-components [--leave-off gatekeeper] [--logs DIR]
    .venv/bin/python hack/bench.py --latency probes --compare-v341-order [--logs DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime as dt
import itertools
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from simcluster import (
    INIT_CONTAINER_SECONDS,
    JOB_SECONDS,
    LATENCY_MODELS,
    PULL_MB_PER_SECOND,
    STARTUP_FAILED_PROBES,
    SimCluster,
    add_local_route,
    node_manifest,
    remove_local_route,
    versions,
)
from v341_order import PHASES, v341_run_order

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from installer.config.defaults import apply_defaults  # noqa: E402
from installer.engine.plan import Action, Plan, Step, run_order  # noqa: E402
from installer.hook import SCHEDULE_BINDING, SPEC_BINDING, STATE_BINDING  # noqa: E402
from installer.launch.warm_client import engine_dir  # noqa: E402
from installer.launch.warm_engine import engine_cpu  # noqa: E402
from installer.modules import MODULES, by_name  # noqa: E402
from installer.settings import CC_GROUP, CC_PLURAL, CC_VERSION, NAMESPACE, STATE_SECRET  # noqa: E402
from installer.spec import merge, nested  # noqa: E402

HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"
V341_HOOK = Path(__file__).resolve().parent / "v341_order.py"
OURS, V341, ALL_ON = "this installer", "v3.4.1's order", "every component on"
SCALE_NODES = "172.30.0.0/16"
"""The extra Nodes' InternalIPs (not loopback's 127/8: an Endpoints address may not be a loopback one)."""


@dataclass(frozen=True)
class Timed:
    """One command's wall seconds, its stderr (the hook's log) and the CPU seconds of it and of every process under
    it that it waited for (user + system). CPU time is what the command itself did: unlike the wall, it hardly
    grows when other work shares the cores."""

    seconds: float
    log: str
    cpu: float


class WarmCpu:
    """The CPU seconds the warm engine of this process' hooks (installer.launch.warm_engine) and the runs it forked
    used since this was made: a hook run through it does its work in the warm engine's child, not under the hook."""

    def __init__(self) -> None:
        self.directory = engine_dir(os.getpid())
        self.before = engine_cpu(self.directory)

    def used(self) -> float:
        after = engine_cpu(self.directory)
        if after is None:
            return 0.0
        if self.before is None or self.before[0] != after[0]:  # started meanwhile: all of it
            return after[1]
        return after[1] - self.before[1]


def timed(argv: list[str], env: dict[str, str]) -> Timed:
    before, warm = resource.getrusage(resource.RUSAGE_CHILDREN), WarmCpu()
    start = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800, check=False)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime + warm.used()
    return Timed(elapsed, proc.stderr, cpu)


def medians(runs: list[Timed]) -> tuple[float, float]:
    """The median wall and the median CPU seconds of ``runs``."""
    return statistics.median(r.seconds for r in runs), statistics.median(r.cpu for r in runs)


def ran(log: str) -> int:
    return sum(1 for line in log.splitlines() if line.startswith("task ") and " status is " in line)


def at(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp)


def span(item: dict[str, Any]) -> float:
    return (at(item["end"]) - at(item["start"])).total_seconds()


OrderOf = Callable[[Plan], dict[str, dict[str, bool]]]


def critical_chain(modules: list[dict[str, Any]], order_of: OrderOf = run_order) -> tuple[float, list[str]]:
    """The longest chain of measured module durations along the install order the run was scheduled by
    (``order_of``, the engine's ``run_order`` unless told, of the modules run): its seconds and its modules, first to
    last."""
    took = {m["module"]: span(m) for m in modules}
    order = order_of(Plan(tuple(Step(name, Action.INSTALL) for name in took)))
    finish: dict[str, float] = {}
    via: dict[str, str | None] = {}

    def done(name: str) -> float:
        if name not in finish:
            before = list(order[name])
            via[name] = max(before, key=done, default=None)
            finish[name] = (done(via[name]) if via[name] else 0.0) + took[name]
        return finish[name]

    chain = [max(took, key=done)]
    while (previous := via[chain[-1]]) is not None:
        chain.append(previous)
    return finish[chain[0]], chain[::-1]


def critical_path(modules: list[dict[str, Any]]) -> float:
    """Longest chain of measured module durations along the registry's install order (among the modules run)."""
    return critical_chain(modules)[0]


def fresh_cluster(tmp: str, latency: str | None) -> SimCluster:
    """A simulated cluster in ``<tmp>/cluster`` (stopped with this process), under the latency model ``latency``."""
    return SimCluster(Path(tmp) / "cluster", die_with_parent=True, latency=latency)


class Bench:
    def __init__(self, cluster: SimCluster, base: Path) -> None:
        self.cluster, self.base = cluster, base
        self.env = {**os.environ, **cluster.env(), "KS_BASE_DIR": str(base)}
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env['PATH']}"

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return json.loads(self.cluster.kubectl("get", kind, name, "-n", NAMESPACE, "-o", "json").stdout)

    def hook(self, binding: str | None = None) -> Timed:
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
    def installed(cls, cluster: SimCluster, base: Path, patch: dict[str, Any] | None = None) -> Bench:
        """A bench on ``cluster`` with the installer manifest's CRD and the default cc applied (nothing run yet),
        ``patch`` merged into its spec first."""
        cluster.kubectl("apply", "-f", str(REPO / "deploy" / "kubesphere-installer.yaml"))
        cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
        if patch is None:
            cluster.kubectl("apply", "-f", str(REPO / "deploy" / "cluster-configuration.yaml"))
        else:
            cc = yaml.safe_load((REPO / "deploy" / "cluster-configuration.yaml").read_text())
            merge(cc["spec"], copy.deepcopy(patch))
            cluster.kubectl("apply", "-f", "-", input=json.dumps(cc))
        return cls(cluster, base)

    def run_hook(self, sample: bool = False, hook: Path = HOOK) -> HookRun:
        """The hook on the full path (no binding context), timed from its launch; with ``sample``, the memory of
        its process tree sampled meanwhile. ``hook``: the script to run (:data:`V341_HOOK`: the same hook with
        v3.4.1's order imposed)."""
        before, cluster, warm = resource.getrusage(resource.RUSAGE_CHILDREN), self.cluster_cpu(), WarmCpu()
        started, start = time.time(), time.monotonic()
        proc = subprocess.Popen([sys.executable, str(hook)], env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        memory = TreeMemory(proc.pid) if sample else None
        if memory:
            memory.start()
        try:
            _, log = proc.communicate(timeout=1800)
        finally:
            if memory:
                memory.stop()
        seconds = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"the hook failed ({proc.returncode}):\n{log[-3000:]}")
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime + warm.used()
        used = {name: seconds_ - cluster.get(name, 0.0) for name, seconds_ in self.cluster_cpu().items()}
        return HookRun(started, seconds, log, memory, cpu, used, os.getloadavg()[0])

    def cluster_cpu(self) -> dict[str, float]:
        """CPU seconds each of the simulated cluster's processes (kube-apiserver, etcd, kwok, ...) used so far."""
        out = {}
        for record in self.cluster.records():
            with contextlib.suppress(OSError, IndexError):
                fields = Path(f"/proc/{record['pid']}/stat").read_text().rsplit(")", 1)[1].split()
                out[record["name"]] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return out

    def console_ready(self, run: HookRun) -> float:
        """Seconds from the hook's launch to the welcome box (kubesphere_running, written once the console is
        ready and every module of the run has ended); the cc's ConsoleReady condition must say so too."""
        conditions = self.get("cc", "ks-installer").get("status", {}).get("conditions") or []
        assert any(c["type"] == "ConsoleReady" and c["status"] == "True" for c in conditions), conditions
        return (self.base / "playbooks" / "kubesphere_running").stat().st_mtime - run.started

    def noop_edit(self, round_: int) -> Timed:
        """An edit that changes no input (the default written out, then removed again: a new generation each),
        settled from the snapshots."""
        self.patch({"common": {"redis": {"volumeSize": None if round_ % 2 else "2Gi"}}})
        run = self.hook(SPEC_BINDING)
        assert ran(run.log) == 0 and "Settled from shell-operator's snapshots" in run.log, run.log
        return run

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
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, fresh_cluster(tmp, args.latency) as cluster:
        bench = Bench.installed(cluster, Path(tmp) / "kubesphere")
        bench.hook()
        switch = by_name()[args.module].enabled.paths[0]
        for size in sizes:
            grow(bench, size, args.namespaces if size != sizes[0] else 0)
            bench.hook()  # settle whatever the growth changed (none of the installer's inputs)
            noop, tick, drift, toggle = [], [], [], []
            for i in range(args.rounds):
                noop.append(bench.noop_edit(i).seconds)
                tick.append(bench.hook(SCHEDULE_BINDING).seconds)
                check = timed([sys.executable, "-m", "installer", "reconcile", "--check-drift"], bench.env)
                assert ran(check.log) == 0, check.log
                drift.append(check.seconds)
                bench.patch(nested(switch, True))
                toggled = bench.hook()
                assert ran(toggled.log) == 1, toggled.log
                toggle.append(toggled.seconds)
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


CHOICES: dict[str, Any] = {"multicluster.clusterRole": "host", "network.topology.type": "weave-scope"}
"""The value that switches a module on, for the switch paths that are not booleans (the others are set to true)."""
WAIT = re.compile(r"\bwait\b", re.IGNORECASE)
APPLY_VERBS = frozenset({"apply", "install", "uninstall", "create", "replace", "remove", "delete", "ensure", "register",
                         "label", "relabel", "annotate", "adopt", "roll", "give", "import", "stop"})
"""Task verbs (the first word after ``Module |`` in a task's name) of tasks that write to the cluster."""
KINDS = ("wait", "apply", "render", "other", "skipped")
RUN_ARG = re.compile(r"/([\w.-]+?)-[a-z0-9_]{8}/inventory/hosts\b")
"""A module's run on its command line: its private data dir's inventory, ``<run dir>/<module>-<random>/inventory/hosts``
(installer.engine.runner; the play itself is playbooks/install.yaml or uninstall.yaml, the same for every module)."""


def switch_all_on(spec: dict[str, Any], leave: tuple[str, ...] = ()) -> dict[str, Any]:
    """The merge patch of ``spec`` that switches on every module with a switch but those in ``leave``: in registry
    order, each of the module's switch paths set (true, or its :data:`CHOICES` value) until the module is on; a
    module an earlier one's paths switched on already (fluentbit with logging) changes nothing more."""
    if unknown := sorted(set(leave) - by_name().keys()):
        raise SystemExit(f"no such modules: {unknown}")
    full, patch = apply_defaults(copy.deepcopy(spec)), {}
    for module in (m for m in MODULES if m.name not in leave):
        for path in module.enabled.paths:
            if module.enabled(full):
                break
            merge(full, nested(path, CHOICES.get(path, True)))
            merge(patch, nested(path, CHOICES.get(path, True)))
    if off := [m.name for m in MODULES if not m.enabled(full) and m.name not in leave]:
        raise SystemExit(f"the registry's switch paths do not switch on {off}: give their values in CHOICES")
    if on := [name for name in leave if by_name()[name].enabled(full)]:
        raise SystemExit(f"cannot leave {on} off: another module's switch, or the default, turns it on")
    return patch


def task_kind(task: dict[str, Any]) -> str:
    """What a timeline task spent its time on, from its outcome and name (the timeline records no action):
    ``skipped`` (its condition was false); ``wait`` (the name says "wait": a readiness wait, ``ks_manifest wait:
    true`` or a retried ``ks_info``, or a Job run to completion); ``apply`` (its verb writes: Apply, Remove,
    Ensure, Register, ...; see :data:`APPLY_VERBS`); ``render`` (Render: templates and parsing); ``other`` (look-ups,
    checks, notes, facts)."""
    name = task["task"]
    verb = (name.split("|", 1)[-1].split() or [""])[0].lower()
    if task["outcome"] == "skipped":
        return "skipped"
    if WAIT.search(name):
        return "wait"
    if verb in APPLY_VERBS:
        return "apply"
    return "render" if verb == "render" else "other"


def breakdown(module: dict[str, Any]) -> dict[str, float]:
    """Seconds of one playbook run by where they went: ``start-up`` (the engine starting the run to its first task:
    ansible-runner, the fork, Ansible's import, playbook parsing), task time by :func:`task_kind`, and ``rest``
    (between tasks and after the last one)."""
    tasks = sorted(module["tasks"], key=lambda t: t["start"])
    out = {"start-up": (at(tasks[0]["start"]) - at(module["start"])).total_seconds() if tasks else span(module)}
    out |= dict.fromkeys(KINDS, 0.0)
    for task in tasks:
        out[task_kind(task)] += span(task)
    out["rest"] = span(module) - sum(out.values())
    return out


def queued(modules: list[dict[str, Any]], order_of: OrderOf = run_order) -> dict[str, float]:
    """Per module: seconds from when it could start (its last predecessor in this run finished, or the first module
    started) to when it started: a wait for a free slot (KS_MAX_PARALLEL) plus the executor's poll."""
    ends = {m["module"]: at(m["end"]) for m in modules}
    first = min(at(m["start"]) for m in modules)
    order = order_of(Plan(tuple(Step(name, Action.INSTALL) for name in ends)))
    out = {}
    for m in modules:
        ready = max((ends[d] for d in order[m["module"]]), default=first)
        out[m["module"]] = (at(m["start"]) - ready).total_seconds()
    return out


def _kib(pid: int, path: str, field_: str) -> int:
    try:
        text = Path(f"/proc/{pid}/{path}").read_text()
    except OSError:
        return 0
    match = re.search(rf"^{field_}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def _tree(root: int) -> dict[int, int]:
    """``root`` and its descendants, each mapped to its parent."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, todo = {root: parents.get(root, 0)}, [root]
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while todo:
        for child in children.get(todo.pop(), []):
            tree[child] = parents[child]
            todo.append(child)
    return tree


@dataclass(eq=False)  # a Thread must stay hashable
class TreeMemory(threading.Thread):
    """Polls the memory of process ``pid`` and its descendants every ``interval`` seconds until :meth:`stop`.

    Peaks, in KiB: VmRSS and VmHWM of the root (the engine), the VmRSS sum of each module's Ansible run (the
    processes whose command line names its private data dir, ``.../<module>-<random>/inventory/hosts``, with their
    descendants: ansible-runner's client, the child forked from the fork server and its task workers) and of the whole
    tree; and
    the PSS sums (each shared page counted once, as the memory cgroup charges it; forked processes share most of their
    pages, so the RSS sum counts those several times)."""

    pid: int
    interval: float = 0.1
    root: int = 0
    root_hwm: int = 0
    total: int = 0
    total_pss: int = 0
    processes: int = 0
    samples: int = 0
    cpu: float = 0.0
    runs: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Module → (peak RSS sum, peak PSS sum) of its run."""
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        super().__init__(daemon=True)

    def run(self) -> None:
        while not self.done.is_set():
            start = time.thread_time()
            self.sample()
            self.cpu += time.thread_time() - start
            self.done.wait(self.interval)

    def stop(self) -> None:
        self.done.set()
        self.join()

    def sample(self) -> None:
        tree = _tree(self.pid)
        commands = {}
        for pid in tree:
            with contextlib.suppress(OSError):
                commands[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        rss = {pid: _kib(pid, "status", "VmRSS") for pid in tree}
        pss = {pid: _kib(pid, "smaps_rollup", "Pss") for pid in tree}
        runs: dict[str, list[int]] = {}
        for pid in tree:
            ancestor = pid
            while ancestor in tree and not RUN_ARG.search(commands.get(ancestor, "")):
                ancestor = tree[ancestor]
            if ancestor in tree:
                module = RUN_ARG.search(commands[ancestor])
                assert module is not None
                runs.setdefault(module.group(1), []).append(pid)
        self.samples += 1
        self.root = max(self.root, rss[self.pid])
        self.root_hwm = max(self.root_hwm, _kib(self.pid, "status", "VmHWM"))
        self.total, self.total_pss = max(self.total, sum(rss.values())), max(self.total_pss, sum(pss.values()))
        self.processes = max(self.processes, len(tree))
        for module, pids in runs.items():
            old = self.runs.get(module, (0, 0))
            self.runs[module] = (max(old[0], sum(rss[p] for p in pids)), max(old[1], sum(pss[p] for p in pids)))


@dataclass
class HookRun:
    """One run of the hook: when it was launched (epoch seconds), how long it took, its log, memory and CPU."""

    started: float
    seconds: float
    log: str
    memory: TreeMemory | None = None
    cpu: float = 0.0
    """CPU seconds of the hook and every process under it."""
    cluster_cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each simulated cluster process used meanwhile."""
    load: float = 0.0
    """The machine's 1-minute load average when the hook ended (other work shares the cores)."""


class _Receiver(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@contextlib.contextmanager
def telemetry_receiver() -> Iterator[str]:
    """A URL on loopback that answers the telemetry module's usage report (KS_TELEMETRY_URL): none leaves the
    machine."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/log/"
    finally:
        server.shutdown()


def memory_limit() -> int:
    """The installer container's ``resources.limits.memory`` in deploy/kubesphere-installer.yaml, in MiB."""
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "K": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    for doc in yaml.safe_load_all((REPO / "deploy" / "kubesphere-installer.yaml").read_text()):
        if doc and doc.get("kind") == "Deployment":
            limit = str(doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"])
            number, unit = re.fullmatch(r"(\d+)([KMG]i?)?", limit).groups()  # type: ignore[union-attr]
            return round(int(number) * units.get(unit or "", 1 / 2**20))
    raise SystemExit("deploy/kubesphere-installer.yaml: no Deployment with a memory limit")


def _mib(kib: int) -> str:
    return f"{kib / 1024:6.0f} MiB"


def report_reconcile(title: str, run: HookRun, timeline: dict[str, Any], console: float | None = None) -> None:
    """The reconcile against its critical path, the hook's phases, and each module's playbook by where its time
    went (and the same summed, over every module and over the critical chain)."""
    modules = sorted(timeline["modules"], key=lambda m: m["start"])
    path, chain = critical_chain(modules)
    launched = dt.datetime.fromtimestamp(run.started, dt.UTC)

    def since(stamp: str) -> float:
        return (at(stamp) - launched).total_seconds()

    first, last = min(since(m["start"]) for m in modules), max(since(m["end"]) for m in modules)
    print(f"{title}: {run.seconds:.2f}s hook wall, modules run: {ran(run.log)}", flush=True)
    print(f"  critical path of the DAG:  {path:7.2f}s  ratio wall / critical path: {run.seconds / path:.2f}  "
          f"(goal <= 1.1); chain: {' -> '.join(chain)}")
    print(f"  hook: launch to reconcile start {since(timeline['start']):.2f}s (interpreter, imports, reads, plan), "
          f"to the first module {first:.2f}s, modules {last - first:.2f}s, after the last one "
          f"{run.seconds - last:.2f}s (welcome, status)")
    top = sorted(run.cluster_cpu.items(), key=lambda i: -i[1])
    print(f"  CPU: hook tree {run.cpu:.1f}s ({run.cpu / run.seconds:.2f} cores over the wall), simulated cluster "
          f"{sum(run.cluster_cpu.values()):.1f}s (" + ", ".join(f"{n} {c:.1f}" for n, c in top[:3])
          + f"); load average {run.load:.1f} on {os.cpu_count()} cores")
    if console is not None:
        ends = ", ".join(f"{m['module']} {since(m['end']):.1f}s" for m in modules if by_name()[m["module"]].console)
        print(f"  ConsoleReady (welcome box) at {console:.1f}s; console modules finished at: {ends}")
    waiting = queued(modules)
    parts = {m["module"]: breakdown(m) for m in modules}
    columns = ("start-up", *KINDS, "rest")
    print("  per module, seconds since launch and seconds of its run: start-up = run start to first task (Ansible's "
          "start);\n  wait/apply/render/other/skipped = task time by kind; rest = between tasks; queued = ready "
          "(predecessors done) to started")
    print(f"    {'module':<15}{'start':>6}{'end':>7}{'wall':>7}{'tasks':>6}" + "".join(f"{c:>9}" for c in columns)
          + f"{'queued':>8}")
    for m in modules:
        name = m["module"]
        mark = "*" if name in chain else " "
        print(f"   {mark}{name:<15}{since(m['start']):6.1f}{since(m['end']):7.1f}{span(m):7.2f}{len(m['tasks']):6d}"
              + "".join(f"{parts[name][c]:9.2f}" for c in columns) + f"{waiting[name]:8.2f}")
    for label, names in (("sum, all modules", list(parts)), ("sum, critical chain (*)", chain)):
        total = sum(span(m) for m in modules if m["module"] in names)
        sums = {c: sum(parts[n][c] for n in names) for c in columns}
        print(f"    {label:<26}{total:9.2f}" + "".join(f"{sums[c]:9.2f}" for c in columns)
              + f"{sum(waiting[n] for n in names):8.2f}")
        print(f"    {'  share of its wall':<35}" + "".join(f"{sums[c] / total:9.0%}" for c in columns))


def report_memory(memory: TreeMemory, limit: int) -> None:
    """The peaks of the hook's process tree against the installer container's memory limit."""
    largest = max(memory.runs, key=lambda m: memory.runs[m][0])
    print(f"  memory, every {memory.interval:g}s ({memory.samples} samples, the sampler's CPU {memory.cpu:.1f}s), "
          f"limit {limit} MiB (deploy/kubesphere-installer.yaml):")
    print(f"    hook (engine) alone:      {_mib(memory.root)} VmRSS peak sampled, {_mib(memory.root_hwm)} VmHWM")
    print(f"    largest Ansible run:      {_mib(memory.runs[largest][0])} VmRSS sum ({largest}; "
          f"{_mib(memory.runs[largest][1]).strip()} PSS)")
    print(f"    whole tree (up to {memory.processes} processes): {_mib(memory.total)} VmRSS sum, "
          f"{_mib(memory.total_pss)} PSS sum; limit holds: {'yes' if memory.total_pss / 1024 < limit else 'NO'} "
          f"(PSS, what the cgroup charges, beside shell-operator and the page cache), "
          f"{'yes' if memory.total / 1024 < limit else 'no'} even by the RSS sum")
    print("    per run, peak VmRSS sum / PSS sum: " + ", ".join(
        f"{m} {r / 1024:.0f}/{p / 1024:.0f}" for m, (r, p) in sorted(memory.runs.items(), key=lambda i: -i[1][0])))


def keep(logs: Path | None, name: str, run: HookRun, bench: Bench) -> None:
    """With ``--logs``: the hook's log and the reconcile's timeline as ``<logs>/<name>.log`` and ``.timeline.json``."""
    if logs:
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"{name}.log").write_text(run.log)
        (logs / f"{name}.timeline.json").write_text(json.dumps(bench.timeline(), indent=1))


def all_components(args: argparse.Namespace) -> int:
    """Item 1 and 4 of the benchmark's all-components mode (see the module's docstring): two fresh clusters."""
    limit = memory_limit()
    spec = yaml.safe_load((REPO / "deploy" / "cluster-configuration.yaml").read_text())["spec"]
    patch = switch_all_on(spec, tuple(n for n in (args.leave_off or "").split(",") if n))
    print(f"every component on (from the registry): {json.dumps(patch, separators=(',', ':'))}", flush=True)
    with telemetry_receiver() as url:
        with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, fresh_cluster(tmp, args.latency) as cluster:
            bench = Bench.installed(cluster, Path(tmp) / "kubesphere")
            bench.env["KS_TELEMETRY_URL"] = url
            first = bench.run_hook()
            default_console = bench.console_ready(first)
            report_reconcile("default install (hook)", first, bench.timeline(), default_console)
            keep(args.logs, "default-install", first, bench)
            bench.patch(patch)
            edit = bench.run_hook(sample=True)
            report_reconcile("\nevery component on in one edit (hook)", edit, bench.timeline())
            keep(args.logs, "all-on-edit", edit, bench)
            assert edit.memory is not None
            report_memory(edit.memory, limit)
        with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, fresh_cluster(tmp, args.latency) as cluster:
            bench = Bench.installed(cluster, Path(tmp) / "kubesphere", patch)
            bench.env["KS_TELEMETRY_URL"] = url
            fresh = bench.run_hook(sample=True)
            console = bench.console_ready(fresh)
            report_reconcile("\nfresh install with every component on (hook)", fresh, bench.timeline(), console)
            keep(args.logs, "all-on-install", fresh, bench)
            assert fresh.memory is not None
            report_memory(fresh.memory, limit)
    print(f"\nConsoleReady after launch: default install {default_console:.1f}s, every component on "
          f"{console:.1f}s; ratio {console / default_console:.2f}  (goal: about 1, the console independent of the "
          "pluggable components)")
    return 0


class ConditionTimes(threading.Thread):
    """Watches the cc from the bench: the epoch seconds at which each of its conditions was first seen True."""

    def __init__(self, kubeconfig: Path) -> None:
        super().__init__(daemon=True)
        self.kubeconfig = kubeconfig
        self.seen: dict[str, float] = {}
        self.watching = threading.Event()
        self.done = threading.Event()

    def run(self) -> None:
        from kubernetes import client, config, watch

        api = client.CustomObjectsApi(config.new_client_from_config(str(self.kubeconfig)))
        with contextlib.suppress(Exception):  # the cluster stops under it at the end
            for event in watch.Watch().stream(api.list_namespaced_custom_object, CC_GROUP, CC_VERSION, NAMESPACE,
                                              CC_PLURAL, field_selector="metadata.name=ks-installer",
                                              timeout_seconds=3600):
                now = time.time()
                self.watching.set()
                for condition in (event["object"].get("status") or {}).get("conditions") or []:
                    if condition.get("status") == "True":
                        self.seen.setdefault(condition["type"], now)
                if self.done.is_set():
                    return

    def __enter__(self) -> ConditionTimes:
        self.start()
        if not self.watching.wait(60):
            raise SystemExit("could not watch cc ks-installer")
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()


@dataclass
class OrderRun:
    """One fresh install under one schedule: seconds from the hook's launch to each figure."""

    run: HookRun
    timeline: dict[str, Any]
    order_of: OrderOf
    console: float
    """ConsoleReady: ks-apiserver and ks-console Available once the console's modules are in (the cc's condition)."""
    welcome: float
    """The welcome box (kubesphere_running written)."""
    ready: float
    """The cc's Ready condition (every module of the run in)."""

    @property
    def path(self) -> tuple[float, list[str]]:
        """The critical path of the modules' measured durations along the order the run was scheduled by."""
        return critical_chain(self.timeline["modules"], self.order_of)

    @property
    def over_path(self) -> float:
        """The install (the hook's wall) over its critical path."""
        return self.run.seconds / self.path[0]


def held_by(modules: list[dict[str, Any]], order_of: OrderOf) -> dict[str, str | None]:
    """Per module, the predecessor (by ``order_of``) that ended last: what it waited for (None: nothing)."""
    ends = {m["module"]: at(m["end"]) for m in modules}
    order = order_of(Plan(tuple(Step(name, Action.INSTALL) for name in ends)))
    return {name: max(order[name], key=ends.__getitem__, default=None) for name in ends}


def report_order_run(title: str, result: OrderRun) -> None:
    """When the console, the box and Ready came; the critical path; per module its span, readiness waits and what
    held it back; the chain of waits that led to ConsoleReady (a dependency such as ks-core's on OpenLDAP shows
    there)."""
    run, modules = result.run, sorted(result.timeline["modules"], key=lambda m: m["start"])
    launched = dt.datetime.fromtimestamp(run.started, dt.UTC)

    def since(stamp: str) -> float:
        return (at(stamp) - launched).total_seconds()

    path, chain = result.path
    by = held_by(modules, result.order_of)
    print(f"{title}: ConsoleReady {result.console:.1f}s, welcome box {result.welcome:.1f}s, Ready {result.ready:.1f}s "
          f"after launch (hook wall {run.seconds:.1f}s, modules run: {ran(run.log)}, load average {run.load:.1f} on "
          f"{os.cpu_count()} cores)", flush=True)
    print(f"  critical path {path:.1f}s: {' -> '.join(chain)}; install / critical path {result.over_path:.2f}")
    links = [m for m in modules if m["module"] in chain]  # in start order, as ``modules``
    gaps = sum(since(b["start"]) - since(a["end"]) for a, b in itertools.pairwise(links))
    print(f"  beyond it: {since(modules[0]['start']):.1f}s from launch to the first module (interpreter, imports, "
          f"reads, plan), {gaps:.1f}s between the chain's modules (the executor's poll), "
          f"{run.seconds - max(since(m['end']) for m in modules):.1f}s after the last one (welcome box, status)")
    print(f"    {'module':<15}{'start':>6}{'end':>7}{'wall':>7}{'wait':>7}  held by (its predecessor that ended last)")
    for m in modules:
        name, parts = m["module"], breakdown(m)
        before = by[name]
        held = f"{before} (ended {since(next(x['end'] for x in modules if x['module'] == before)):.1f}s)" \
            if before else "-"
        print(f"   {'*' if name in chain else ' '}{name:<15}{since(m['start']):6.1f}{since(m['end']):7.1f}"
              f"{span(m):7.1f}{parts['wait']:7.1f}  {held}")
    named = {m["module"]: m for m in modules}
    console, links = next((n for n in ("ks-config", "ks-core") if n in named), None), []
    while console is not None:
        m = named[console]
        links.append(f"{console} {since(m['start']):.1f}-{since(m['end']):.1f}s (readiness waits "
                     f"{breakdown(m)['wait']:.1f}s)")
        console = by[console]
    print(f"  ConsoleReady's chain: {' -> '.join(reversed(links))} -> ConsoleReady {result.console:.1f}s")


def order_run(bench: Bench, hook: Path, order_of: OrderOf) -> OrderRun:
    """A fresh install by ``hook`` on ``bench``'s cluster, with the cc's conditions watched meanwhile."""
    with ConditionTimes(bench.cluster.kubeconfig) as conditions:
        run = bench.run_hook(hook=hook)
    running = (bench.base / "playbooks" / "kubesphere_running").stat().st_mtime
    missing = {"ConsoleReady", "Ready"} - conditions.seen.keys()
    if missing:
        raise SystemExit(f"the install ended without {sorted(missing)} True:\n{run.log[-3000:]}")
    return OrderRun(run, bench.timeline(), order_of, conditions.seen["ConsoleReady"] - run.started,
                    running - run.started, conditions.seen["Ready"] - run.started)


def latency_model(latency: str | None) -> str:
    """One line on the simulated cluster's latency model."""
    if latency is None:
        return "latency model: none (every pod Ready once scheduled: the engine's and Ansible's time only)"
    return (f"latency model {latency!r} (hack/simcluster.py POD_READY_SECONDS): a pod is Ready after its images' "
            f"pulls at {PULL_MB_PER_SECOND} MB/s (PULL_SIZES_MB), {INIT_CONTAINER_SECONDS}s per init container and "
            f"its containers' readinessProbe.initialDelaySeconds (startupProbe: initialDelaySeconds + periodSeconds "
            f"x {STARTUP_FAILED_PROBES}); a Job's pod completes {JOB_SECONDS}s after it started")


def compare_orders(args: argparse.Namespace) -> int:
    """This installer's schedule against v3.4.1's order (:mod:`v341_order`), each a fresh install on a fresh
    cluster under the same latency model, for the default cc and for every component on; the figures as ratios."""
    spec = yaml.safe_load((REPO / "deploy" / "cluster-configuration.yaml").read_text())["spec"]
    configs = {"default cc": None, ALL_ON: switch_all_on(spec, tuple(
        n for n in (args.leave_off or "").split(",") if n))}
    schedules = {OURS: (HOOK, run_order), V341: (V341_HOOK, v341_run_order)}
    print(latency_model(args.latency))
    print("v3.4.1's order: " + " -> ".join(",".join(p) if p else "(every other module, in parallel)" for p in PHASES)
          + "; each run once, on a fresh cluster", flush=True)
    results: dict[tuple[str, str], OrderRun] = {}
    with telemetry_receiver() as url:
        for cc_name, patch in configs.items():
            for schedule, (hook, order_of) in schedules.items():
                with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, \
                        fresh_cluster(tmp, args.latency) as cluster:
                    bench = Bench.installed(cluster, Path(tmp) / "kubesphere", patch)
                    bench.env["KS_TELEMETRY_URL"] = url
                    result = results[cc_name, schedule] = order_run(bench, hook, order_of)
                    report_order_run(f"\n{cc_name}, {schedule}", result)
                    keep(args.logs, f"{cc_name}-{schedule}".replace(" ", "-").replace("'", ""), result.run, bench)
    print(f"\n{latency_model(args.latency)}")
    return 0 if summary(results, list(configs)) else 1


GOALS = {"console": 0.5, "ready": 0.75}
"""With every component on: this installer's ConsoleReady and Ready over v3.4.1's order's, at most."""
PATH_GOAL = 1.05
"""This installer's install over its critical path, at most."""


def summary(results: dict[tuple[str, str], OrderRun], configs: list[str]) -> bool:
    """The table of :func:`compare_orders`; whether every goal is met."""
    print("seconds from the hook's launch; ratio = this installer / v3.4.1's order (both run by this engine)")
    print(f"{'':<24}" + "".join(f"{cc:>34}" for cc in configs))
    print(f"{'figure':<24}" + f"{'ours':>12}{'v3.4.1':>10}{'ratio':>12}" * len(configs) + "   goal")
    met = []
    for label, key in (("ConsoleReady", "console"), ("welcome box", "welcome"), ("Ready", "ready")):
        row = f"{label:<24}"
        for cc in configs:
            ours, theirs = getattr(results[cc, OURS], key), getattr(results[cc, V341], key)
            row += f"{ours:12.1f}{theirs:10.1f}{ours / theirs:12.2f}"
        if key in GOALS:
            ok = getattr(results[ALL_ON, OURS], key) / getattr(results[ALL_ON, V341], key) <= GOALS[key]
            met.append(ok)
            row += f"   <= {GOALS[key]:.2f} with every component on: {'met' if ok else 'MISSED'}"
        print(row)
    row = f"{'install / critical path':<24}"
    for cc in configs:
        row += f"{results[cc, OURS].over_path:12.2f}{results[cc, V341].over_path:10.2f}{'':>12}"
    ok = all(results[cc, OURS].over_path <= PATH_GOAL for cc in configs)
    met.append(ok)
    print(row + f"   <= {PATH_GOAL:.2f}, ours: {'met' if ok else 'MISSED'}")
    print(f"{'critical path (s)':<24}" + "".join(
        f"{results[cc, OURS].path[0]:12.1f}{results[cc, V341].path[0]:10.1f}{'':>12}" for cc in configs))
    for cc in configs:
        for schedule in (OURS, V341):
            print(f"critical path, {cc}, {schedule}: {' -> '.join(results[cc, schedule].path[1])}")
    return all(met)

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=_positive, default=3)
    parser.add_argument("--module", default="metrics_server", help="module to switch on for the toggle figure")
    parser.add_argument("--scale", help="node counts, e.g. 3,100,500: the cluster-size figures instead")
    parser.add_argument("--namespaces", type=int, default=2000, help="extra namespaces beyond the first size")
    parser.add_argument("--all-components", action="store_true",
                        help="every component on: one edit, then a fresh install; time, where it goes, memory")
    parser.add_argument("--leave-off", metavar="MODULES",
                        help="with --all-components: these modules (comma-separated) stay off, e.g. gatekeeper")
    parser.add_argument("--logs", type=Path, help="with --all-components or --compare-v341-order: write each hook "
                        "run's log and timeline in this directory")
    parser.add_argument("--latency", choices=LATENCY_MODELS,
                        help="the simulated clusters' latency model (hack/simcluster.py): pods Ready after their "
                             "image pulls and probes' delays; default: at once")
    parser.add_argument("--compare-v341-order", action="store_true",
                        help="fresh installs (default cc, every component on) by this installer's schedule and by "
                             "v3.4.1's order (hack/v341_order.py): ConsoleReady, the box and Ready as ratios")
    args = parser.parse_args()
    if args.scale:
        return scale(args)
    if args.compare_v341_order:
        return compare_orders(args)
    if args.all_components:
        return all_components(args)
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp, fresh_cluster(tmp, args.latency) as cluster:
        bench = Bench.installed(cluster, Path(tmp) / "kubesphere")

        first = bench.hook()
        install = bench.timeline()
        print(f"first install (hook):        {first.seconds:7.2f}s  CPU {first.cpu:6.2f}s (the hook, every process "
              f"under it and its runs in the warm engine)  modules run: {ran(first.log)}")
        path = critical_path(install["modules"])
        print(f"  critical path of the DAG:  {path:7.2f}s  ratio install / critical path: {first.seconds / path:.2f}"
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
            tick.append(bench.hook(SCHEDULE_BINDING))
            slow.append(bench.hook())
            assert ran(slow[-1].log) == 0, slow[-1].log
            full.append(timed([sys.executable, "-m", "installer", "reconcile", "--all"], bench.env))
        (no_op, no_op_cpu), (ticked, tick_cpu) = medians(noop), medians(tick)
        forced = statistics.median(r.seconds for r in full)
        print(f"no-op edit (hook, snapshots): {no_op:6.3f}s  CPU {no_op_cpu:.3f}s  median of {args.rounds}  "
              "(goal <= 0.2s)")
        print(f"schedule tick, nothing due:   {ticked:6.3f}s  CPU {tick_cpu:.3f}s")
        print(f"no-op without snapshots:      {medians(slow)[0]:6.3f}s  (the full path: API reads, plan)")
        print(f"forced full reconcile:        {forced:6.2f}s  modules run: {ran(full[-1].log)}")
        print(f"ratio first install / no-op:  {first.seconds / no_op:6.1f}x wall, {first.cpu / no_op_cpu:6.1f}x CPU  "
              "(goal >= 100)")
        print(f"ratio first install / tick:   {first.seconds / ticked:6.1f}x wall, {first.cpu / tick_cpu:6.1f}x CPU")
        print(f"ratio full / no-op:           {forced / no_op:6.1f}x")
        floor = [timed([sys.executable, "-I", "-c", "pass"], bench.env) for _ in range(max(args.rounds, 5))]
        bare = [timed([sys.executable, "-I", "-S", "-c", "pass"], bench.env) for _ in range(max(args.rounds, 5))]
        print(f"interpreter start (python -I -c pass): {medians(floor)[0]:.3f}s  CPU {medians(floor)[1]:.3f}s; "
              f"without site (-S): {medians(bare)[0]:.3f}s  CPU {medians(bare)[1]:.3f}s")

        switch = by_name()[args.module].enabled.paths[0]  # e.g. metrics_server.enabled
        toggles = []
        for i in range(args.rounds):  # on by the hook (the toggle timed), off again by a reconcile (not timed)
            if i:
                bench.patch(nested(switch, False))
                timed([sys.executable, "-m", "installer", "reconcile"], bench.env)
            bench.patch(nested(switch, True))
            toggle = bench.hook()
            assert ran(toggle.log) == 1, toggle.log
            toggled = next(m for m in bench.timeline()["modules"] if m["module"] == args.module)
            toggles.append((toggle, span(toggled)))
        samples = ", ".join(f"{t.seconds:.2f}s/{p:.2f}s" for t, p in toggles)
        print(f"toggle {args.module} on:  {statistics.median(t.seconds for t, _ in toggles):6.2f}s reconcile "
              f"(CPU {statistics.median(t.cpu for t, _ in toggles):.2f}s); its playbook "
              f"{statistics.median(p for _, p in toggles):6.2f}s; ratio "
              f"{statistics.median(t.seconds / p for t, p in toggles):.2f} median of {args.rounds}  (goal <= 1.15); "
              f"each reconcile/playbook: {samples}")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work on the machine stretches "
              "the wall; the CPU seconds hardly change)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
