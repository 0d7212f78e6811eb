"""The README's demo command, in one demo from up to down (each demo starts a cluster and installs the platform):
up reaches Ready and prints the welcome box, and reports what the running shell-operator's reconcile found (not a
status an earlier one left); down leaves nothing running."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from simcluster import kill_tree, pid_alive, process_tree, tool_path
from v341_cluster import UPSTREAM_ROLLS, V341Cluster

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]


def demo(command: str, state: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KS_DEMO_DIR": str(state)}
    env.pop("KUBECONFIG", None)
    return subprocess.run([sys.executable, str(REPO / "hack" / "demo.py"), command, "--timeout", "300", *flags],
                          env=env, capture_output=True, text=True, timeout=900, check=False)


def test_demo_up_restarted_operator_failed_edit_and_down(tmp_path: Path) -> None:
    """One demo from up to down: up reaches Ready and is idempotent; after the operator is restarted, a module Failed
    in the status the stopped one left (at the cc's current generation) does not end `up` at once: it waits for the
    new operator's reconcile and reports that one (Ready again), as it does over a Ready True the stopped one left;
    a user's edit survives `up` and a failing module ends it at once with the reason from status; down leaves
    nothing running."""
    state = tmp_path / "demo"
    pids: list[int] = []
    try:
        up = demo("up", state)
        assert up.returncode == 0, up.stderr[-3000:]
        assert "###              Welcome to KubeSphere!           ###" in up.stdout
        assert re.search(r"ks-installer\s+True\s+False\s+4/4\s+Installed\s+v3\.4\.1", up.stdout), up.stdout
        assert f"export KUBECONFIG={state / 'cluster' / 'kubeconfig'}" in up.stdout
        assert (state / "kubesphere" / "results" / "ks-core" / "stdout").is_file()
        # The README's commands as the demo prints them, from a shell without the project's environment.
        exports = "\n".join(line for line in up.stdout.splitlines() if line.startswith("export "))
        readme = subprocess.run(["bash", "-c", f"{exports}\ncd /\npython -m installer status && python -m installer "
                                 "plan && kubectl get cc -n kubesphere-system"], capture_output=True, text=True,
                                timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, check=False)
        assert readme.returncode == 0, readme.stderr[-3000:]
        assert "Ready: True" in readme.stdout and "unchanged: " in readme.stdout, readme.stdout
        pids += [json.loads((state / "shell-operator.pid").read_text())["pid"]]
        pids += [r["pid"] for r in json.loads((state / "cluster" / "pids.json").read_text())]
        pids += [int((state / "pod-logs.pid").read_text())]  # `kubectl logs` of the installer's pod
        again = demo("up", state)  # idempotent: reuses what runs
        assert again.returncode == 0 and "reusing shell-operator" in again.stderr

        # The operator only is stopped (the cluster, the cc and its status stay), leaving a stale failure behind.
        kill_tree(process_tree(pids[0]))
        kubectl = [str(tool_path("kubectl")), f"--kubeconfig={state / 'cluster' / 'kubeconfig'}",
                   "-n", "kubesphere-system"]
        cc = json.loads(subprocess.run([*kubectl, "get", "cc", "ks-installer", "-o", "json"], check=True,
                                       capture_output=True, text=True).stdout)
        failed = {"status": "False", "reason": "ModulesFailed", "message": "failed: ks-core"}
        stale = {"conditions": [{**c, **failed} if c["type"] == "Ready" else c for c in cc["status"]["conditions"]],
                 "modules": {"ks-core": {"phase": "Failed", "failedTask": "Stale task", "message": "an old failure"}}}
        subprocess.run([*kubectl, "patch", "cc", "ks-installer", "--subresource=status", "--type=merge", "-p",
                        json.dumps({"status": stale})], check=True, capture_output=True)
        restarted = demo("up", state)
        assert "Stale task" not in restarted.stderr, restarted.stderr[-3000:]
        assert restarted.returncode == 0, restarted.stderr[-3000:]
        assert "reusing shell-operator" not in restarted.stderr and "shell-operator runs" in restarted.stderr
        assert re.search(r"ks-installer\s+True\s+False\s+4/4\s+Installed\s+v3\.4\.1", restarted.stdout), \
            restarted.stdout
        pids += [json.loads((state / "shell-operator.pid").read_text())["pid"]]
        phase = subprocess.run([*kubectl, "get", "cc", "ks-installer", "-o",
                                "jsonpath={.status.modules.ks-core.phase}"], check=True, capture_output=True,
                               text=True).stdout
        assert phase == "Installed"
        # Restarted again over a status that says Ready True at the cc's generation: `up` still waits for the new
        # operator's own reconcile (a new pod: it writes the welcome file again) before the welcome box.
        kill_tree(process_tree(pids[-1]))
        again = demo("up", state)
        assert again.returncode == 0 and "shell-operator runs" in again.stderr, again.stderr[-3000:]
        assert "###              Welcome to KubeSphere!           ###" in again.stdout, again.stdout
        assert "(no kubesphere_running yet)" not in again.stdout
        pids += [json.loads((state / "shell-operator.pid").read_text())["pid"]]

        # A user's edit survives `up`; a failing module ends `up` at once, with the reason from status.
        subprocess.run([*kubectl, "patch", "cc", "ks-installer", "--type=merge", "-p",
                        '{"spec":{"persistence":{"storageClass":"fast-ssd"}}}'], check=True, capture_output=True)
        started = time.monotonic()
        failing = demo("up", state)
        assert failing.returncode == 1, failing.stderr[-3000:]
        assert "keeping the existing cc/ks-installer" in failing.stderr
        assert "preinstall failed at 'Preinstall | Check the StorageClass for persistent volumes'" in failing.stderr
        assert "fast-ssd" in failing.stderr and time.monotonic() - started < 200
        spec = subprocess.run([*kubectl, "get", "cc", "ks-installer", "-o", "jsonpath={.spec.persistence}"],
                              check=True, capture_output=True, text=True).stdout
        assert "fast-ssd" in spec  # not reverted to the default file
    finally:
        down = demo("down", state)
    assert down.returncode == 0, down.stderr
    assert not state.exists()
    assert not [p for p in pids if pid_alive(p)]


def test_demo_over_a_cluster_that_v341_installed(tmp_path: Path) -> None:
    """`up --from-v341`: the cluster the original left (upstream v3.4.1's own objects, Helm releases and installer
    Deployment), the switch as docs/switching.md says, the real shell-operator under the installer's ServiceAccount:
    Ready, nothing deleted, only the workloads docs/switching.md lists restarted, only the unknown release left in
    Helm, the leftovers in status.adoption."""
    state = tmp_path / "demo"
    try:
        up = demo("up", state, "--from-v341")
        assert up.returncode == 0, up.stderr[-3000:] + up.stdout[-3000:]
        assert re.search(r"ks-installer\s+True\s+False\s+(\d+)/\1\s+Installed\s+v3\.4\.1", up.stdout), up.stdout
        assert re.search(r"objects the original made: \d{3}, deleted: 0\n", up.stdout), up.stdout
        rolled = re.search(r"workloads: \d+, restarted: (\d+)(.*)\n", up.stdout)
        assert rolled, up.stdout
        assert set(ast.literal_eval(rolled[2].strip() or "[]")) == UPSTREAM_ROLLS, rolled[0]
        listed = up.stdout.split("$ helm list -A\n", 1)[1].split("status.adoption:", 1)[0]
        assert [line.split()[0] for line in listed.strip().splitlines()[1:]] == ["extra-dashboards"], listed
        adoption = up.stdout.split("status.adoption:", 1)[1]
        assert all(f'"{leftover}"' in adoption for leftover in V341Cluster().leftovers), adoption
        assert "Retired Helm release kubesphere-system/ks-core: its objects now belong to module ks-core" in up.stdout
    finally:
        down = demo("down", state)
    assert down.returncode == 0, down.stderr
    assert not state.exists()
