"""The installer's image as a user deploys it: `hack/image.sh build` makes it (or finds it cached), and
`hack/demo.sh up --image` runs its entrypoint against a simulated cluster as the manifest's pod would (its
ServiceAccount token, env and volumes, a read-only root filesystem, user 1002): the default cc reaches Ready, and
the welcome box and the modules' logs are inside the container; an edit of the cc runs only what it changes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from installer.version import INSTALLER_IMAGE

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
WELCOME = "###              Welcome to KubeSphere!           ###"


def demo(command: str, state: Path, *flags: str, timeout: float) -> subprocess.CompletedProcess[str]:
    # The local base unless told otherwise: no registry is tried (KS_IMAGE_BASE=auto tries the public images).
    env = {**os.environ, "KS_DEMO_DIR": str(state), "KS_IMAGE_BASE": os.environ.get("KS_IMAGE_BASE", "local")}
    env.pop("KUBECONFIG", None)
    return subprocess.run([sys.executable, str(REPO / "hack" / "demo.py"), command, *flags], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def in_container(name: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "hack" / "image.sh"), "podman", "exec", name, "sh", "-c", script],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.slow(reason="builds the installer image when it is not cached (debootstrap + pip: minutes on a cold "
                         "machine; seconds cached), then installs the default platform with it")
def test_the_image_installs_the_default_platform(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    try:
        up = demo("up", state, "--image", "--timeout", "600", timeout=1800)
        assert up.returncode == 0, up.stderr[-3000:]
        assert WELCOME in up.stdout
        assert re.search(r"ks-installer\s+True\s+False\s+4/4\s+Installed\s+v3\.4\.1", up.stdout), up.stdout
        record = json.loads((state / "shell-operator.pid").read_text())
        assert record["image"] == f"localhost/{INSTALLER_IMAGE}"
        name = record["container"]

        # The reconcile ran in the image: its welcome file and module logs are in the container's /kubesphere.
        running = in_container(name, "cat /kubesphere/playbooks/kubesphere_running")
        assert running.returncode == 0 and WELCOME in running.stdout, running.stderr
        results = in_container(name, "ls /kubesphere/results; wc -c < /kubesphere/results/ks-core/stdout")
        assert {"ks-core", "monitoring"} <= set(results.stdout.split()), results.stdout
        assert int(results.stdout.split()[-1]) > 0
        # As the manifest's pod: user 1002, nothing writable outside its volumes, the image's own code and tools.
        probe = in_container(name, "id -u; touch /opt/ks-installer/x 2>&1; touch /hooks/x 2>&1; "
                                   "for c in python3 kubectl helm jq; do command -v $c; done; "
                                   "ls /opt/ks-installer/roles | wc -l")
        lines = probe.stdout.splitlines()
        assert lines[0] == "1002"
        assert sum("Read-only file system" in line for line in lines) == 2, probe.stdout
        assert lines[3:7] == ["/opt/ks-installer/venv/bin/python3", "/usr/local/bin/kubectl", "/usr/local/bin/helm",
                              "/usr/bin/jq"], probe.stdout
        assert int(lines[-1]) > 10
        mounts = json.loads(subprocess.run(["bash", str(REPO / "hack" / "image.sh"), "podman", "inspect", name],
                                           capture_output=True, text=True, timeout=60, check=True).stdout)[0]
        assert not any(str(REPO) in str(m.get("Source", "")) for m in mounts["Mounts"])  # nothing of the checkout
        # The pod log as the docs' `kubectl logs -l 'app in (ks-install, ks-installer)' -f` shows it: the hook's lines
        # as printed (upstream's), the operator's own with time and level.
        log_path = state / "shell-operator" / "shell-operator.log"
        pod_log = log_path.read_text().splitlines()
        bindings = r"\S+Z INFO     : .*Kubernetes bindings for hook are enabled successfully"
        assert any(re.match(bindings, line) for line in pod_log), pod_log[:40]
        assert {"Start installing ks-core", WELCOME} <= set(pod_log), pod_log[-60:]
        assert any(re.fullmatch(r"task ks-core status is successful  \(\d/4\)", line) for line in pod_log)
        assert not any(line.startswith("{") for line in pod_log), [ln for ln in pod_log if ln.startswith("{")][:5]
        assert not [line for line in pod_log if "file is skipped" in line], pod_log[:40]  # nothing but the hook

        # `kubectl edit cc`: the container's next reconcile runs the one module the change affects.
        mark = len(log_path.read_text())
        subprocess.run([str(state / "cluster" / "bin" / "kubectl"), f"--kubeconfig={state / 'cluster' / 'kubeconfig'}",
                        "-n", "kubesphere-system", "patch", "cc", "ks-installer", "--type=merge", "-p",
                        json.dumps({"spec": {"monitoring": {"node_exporter": {"port": 9101}}}})],
                       check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 300
        while True:
            new = log_path.read_text()[mark:]
            planned = new.find("Plan: upgrade monitoring")
            if (planned >= 0 and "Reconcile finished" in new[planned:]) or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert planned >= 0 and "Reconcile finished, Ready" in new[planned:], new[-3000:]
        assert re.findall(r"^Start (?:installing|upgrading|uninstalling) ([\w-]+)$", new, re.M) == ["monitoring"]
    finally:
        down = demo("down", state, timeout=120)
        assert down.returncode == 0, down.stderr
