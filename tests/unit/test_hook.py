"""The hook's exit code: non-zero only when the installer itself cannot run, so shell-operator retries."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_api_exits_non_zero_with_a_clear_message(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{_closed_port()}",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KS_RESULTS_DIR": str(tmp_path / "results")}
    proc = subprocess.run([sys.executable, str(HOOK)], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 1
    assert "could not talk to the Kubernetes API" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_config_prints_the_binding_and_nothing_else() -> None:
    proc = subprocess.run([sys.executable, str(HOOK), "--config"], capture_output=True, text=True, timeout=60,
                          check=True)
    config = json.loads(proc.stdout)
    assert config["configVersion"] == "v1"
    spec = next(b for b in config["kubernetes"] if b["jqFilter"] == ".spec")
    assert spec["kind"] == "ClusterConfiguration" and spec["apiVersion"] == "installer.kubesphere.io/v1alpha1"
    assert spec["nameSelector"] == {"matchNames": ["ks-installer"]}
    assert spec["namespace"] == {"nameSelector": {"matchNames": ["kubesphere-system"]}}
