"""The README's demo command: up reaches Ready and prints the welcome box; down leaves nothing running."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from simcluster import pid_alive, tool_path

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]


def demo(command: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KS_DEMO_DIR": str(state)}
    env.pop("KUBECONFIG", None)
    return subprocess.run([sys.executable, str(REPO / "hack" / "demo.py"), command, "--timeout", "300"], env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_demo_up_then_down(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    try:
        up = demo("up", state)
        assert up.returncode == 0, up.stderr[-3000:]
        assert "###              Welcome to KubeSphere!           ###" in up.stdout
        assert re.search(r"ks-installer\s+True\s+False\s+4/4\s+Installed\s+v3\.4\.1", up.stdout), up.stdout
        assert f"export KUBECONFIG={state / 'cluster' / 'kubeconfig'}" in up.stdout
        assert (state / "kubesphere" / "results" / "ks-core" / "stdout").is_file()
        pids = [json.loads((state / "shell-operator.pid").read_text())["pid"]]
        pids += [r["pid"] for r in json.loads((state / "cluster" / "pids.json").read_text())]
        again = demo("up", state)  # idempotent: reuses what runs
        assert again.returncode == 0 and "reusing shell-operator" in again.stderr

        # A user's edit survives `up`; a failing module ends `up` at once, with the reason from status.
        kubeconfig = str(state / "cluster" / "kubeconfig")
        kubectl = [str(tool_path("kubectl")), f"--kubeconfig={kubeconfig}", "-n", "kubesphere-system"]
        subprocess.run([*kubectl, "patch", "cc", "ks-installer", "--type=merge", "-p",
                        '{"spec":{"persistence":{"storageClass":"fast-ssd"}}}'], check=True, capture_output=True)
        started = time.monotonic()
        failed = demo("up", state)
        assert failed.returncode == 1, failed.stderr[-3000:]
        assert "keeping the existing cc/ks-installer" in failed.stderr
        assert "preinstall failed at 'Preinstall | Check the StorageClass for persistent volumes'" in failed.stderr
        assert "fast-ssd" in failed.stderr and time.monotonic() - started < 200
        spec = subprocess.run([*kubectl, "get", "cc", "ks-installer", "-o", "jsonpath={.spec.persistence}"],
                              check=True, capture_output=True, text=True).stdout
        assert "fast-ssd" in spec  # not reverted to the default file
    finally:
        down = demo("down", state)
    assert down.returncode == 0, down.stderr
    assert not state.exists()
    assert not [p for p in pids if pid_alive(p)]
