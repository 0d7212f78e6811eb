#!/usr/bin/env python3
"""The installer's main job on the simulated cluster, the way a user meets it.

    up      start the simulated cluster, `kubectl apply` the installer manifest, run shell-operator with
            this repo's hooks under the installer's ServiceAccount (as the pod does), `kubectl apply` the
            default cluster-configuration, wait for `condition=Ready`, print the welcome box and the cc
    down    stop shell-operator and the cluster, remove the state dir
    status  what runs, and where the logs are

State lives in $KS_DEMO_DIR (default /tmp/ks-demo). `up` is idempotent: what already runs is reused.
The Deployment of the manifest gets a kwok-simulated pod (label app=ks-installer); the reconciles are
done by the local shell-operator, which plays that pod.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
from pathlib import Path

from shelloperator import ShellOperator
from simcluster import SimCluster, SimClusterError, kill_tree, pid_alive, process_tree, tool_path

REPO = Path(__file__).resolve().parents[1]
SERVICE_ACCOUNT = ("kubesphere-system", "ks-installer")
DEMO_ENTRIES = {"cluster", "kubesphere", "shell-operator", "shell-operator.pid", "installer.kubeconfig"}


def state_dir() -> Path:
    return Path(os.environ.get("KS_DEMO_DIR") or "/tmp/ks-demo")


def say(msg: str) -> None:
    print(f"[demo] {msg}", file=sys.stderr, flush=True)


def operator_pid(root: Path) -> int | None:
    """The demo's shell-operator pid, if that process still runs (the binary is checked: pids get reused)."""
    pid_file = root / "shell-operator.pid"
    if not pid_file.exists():
        return None
    pid = json.loads(pid_file.read_text())["pid"]
    return pid if pid_alive(pid, str(tool_path("shell-operator"))) else None


def start_cluster(root: Path) -> SimCluster:
    cluster_dir = root / "cluster"
    cluster = SimCluster(cluster_dir)
    if cluster.running():
        say(f"reusing the simulated cluster in {cluster_dir}")
        return SimCluster.attach(cluster.kubeconfig)
    cluster.start()
    atexit.unregister(cluster.stop)  # it outlives this command until `down`
    return cluster


def start_operator(cluster: SimCluster, root: Path) -> int:
    pid = operator_pid(root)
    if pid is not None:
        say(f"reusing shell-operator (pid {pid})")
        return pid
    kubeconfig = cluster.service_account_kubeconfig(*SERVICE_ACCOUNT, root / "installer.kubeconfig")
    operator = ShellOperator(kubeconfig, REPO / "hooks", work_dir=root / "shell-operator",
                             env={"KS_BASE_DIR": str(root / "kubesphere")},  # the image's /kubesphere
                             path_prepend=[cluster.bin_dir], die_with_parent=False)
    operator.start()
    atexit.unregister(operator.stop)
    assert operator.popen is not None
    (root / "shell-operator.pid").write_text(json.dumps({"pid": operator.popen.pid, "log": str(operator.log_path)}))
    operator.wait_for_log(r"Kubernetes bindings for hook are enabled successfully", timeout=60)
    say(f"shell-operator runs (pid {operator.popen.pid}), log: {operator.log_path}")
    return operator.popen.pid


def up(root: Path, timeout: int) -> int:
    root.mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(root)
    say("kubectl apply -f deploy/kubesphere-installer.yaml")
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "kubesphere-installer.yaml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
    start_operator(cluster, root)
    say("kubectl apply -f deploy/cluster-configuration.yaml")
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "cluster-configuration.yaml"))
    say(f"waiting for cc/ks-installer condition=Ready (up to {timeout}s) ...")
    wait = cluster.kubectl("wait", "--for=condition=Ready", f"--timeout={timeout}s", "-n", "kubesphere-system",
                           "cc/ks-installer", check=False, timeout=timeout + 30)
    if wait.returncode:
        say(f"not Ready: {wait.stderr.strip()}")
        print(cluster.kubectl("get", "cc", "-n", "kubesphere-system", "-o", "yaml").stdout)
        return 1
    running = root / "kubesphere" / "playbooks" / "kubesphere_running"
    print(running.read_text() if running.exists() else "(no kubesphere_running yet)")
    print(cluster.kubectl("get", "cc", "-n", "kubesphere-system").stdout)
    print(cluster.kubectl("get", "deploy", "-n", "kubesphere-system").stdout)
    print_where(root, cluster)
    return 0


def print_where(root: Path, cluster: SimCluster) -> None:
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    print(f'export PATH="{cluster.bin_dir}:$PATH"')
    print("kubectl edit cc ks-installer -n kubesphere-system      # change the spec; only affected modules run")
    print(f"pod log (shell-operator):  {root / 'shell-operator' / 'shell-operator.log'}")
    print(f"module logs:               {root / 'kubesphere' / 'results'}/<module>/stdout")


def down(root: Path) -> int:
    pid = operator_pid(root)
    if pid is not None:
        kill_tree(process_tree(pid))
    (root / "shell-operator.pid").unlink(missing_ok=True)
    SimCluster(root / "cluster").stop()
    if root.exists() and {p.name for p in root.iterdir()} <= DEMO_ENTRIES:  # never a user's own directory
        shutil.rmtree(root, ignore_errors=True)
    say(f"stopped; removed {root}")
    return 0


def status(root: Path) -> int:
    cluster = SimCluster(root / "cluster")
    if not cluster.running():
        say(f"no demo in {root}")
        return 1
    pid = operator_pid(root)
    say(f"shell-operator: {f'running (pid {pid})' if pid else 'not running'}")
    attached = SimCluster.attach(cluster.kubeconfig)
    print(attached.kubectl("get", "cc", "-n", "kubesphere-system").stdout)
    print_where(root, attached)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--timeout", type=int, default=900, help="seconds to wait for Ready (up)")
    args = parser.parse_args(argv)
    root = state_dir()
    try:
        if args.command == "up":
            return up(root, args.timeout)
        if args.command == "down":
            return down(root)
        return status(root)
    except SimClusterError as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
