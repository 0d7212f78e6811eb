"""The installer's image run as its pod would run it, against the simulated cluster (``hack/demo.sh up --image``).

    operator = ContainerOperator(image, cluster.server, token, ca_pem, root)
    operator.start()                      # podman run: the image's entrypoint (shell-operator + /hooks)
    operator.exec("cat", "/kubesphere/playbooks/kubesphere_running")

What the Deployment in deploy/kubesphere-installer.yaml gives the pod, the container gets: the ServiceAccount's token
and CA at /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/PORT (the simulated apiserver on
loopback; host network), the container's env, a read-only root filesystem with the manifest's emptyDir volumes
(``/kubesphere`` is a directory of the demo's, so its results are readable from the host), user 1002, no
capabilities. Nothing of the checkout is mounted: the installer's code is the image's.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from shelloperator import LogFollower
from simcluster import SimClusterError, free_ports, spawn

REPO = Path(__file__).resolve().parents[1]
IMAGE_SH = REPO / "hack" / "image.sh"
MANIFEST = REPO / "deploy" / "kubesphere-installer.yaml"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
UID = 1002


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """podman on the image store of hack/image.sh."""
    proc = subprocess.run(["bash", str(IMAGE_SH), "podman", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)
    if check and proc.returncode:
        raise SimClusterError(f"podman {' '.join(args[:2])} failed: {proc.stderr.strip()[-2000:]}")
    return proc


def build_image(base: str = "auto") -> str:
    """``hack/image.sh build`` (cached by its inputs); the image's local reference."""
    proc = subprocess.run(["bash", str(IMAGE_SH), "build", "--base", base], stdout=subprocess.PIPE, text=True,
                          check=False)  # its progress goes to our stderr
    if proc.returncode:
        raise SimClusterError("hack/image.sh build failed")
    return proc.stdout.strip().splitlines()[-1]


def deployment_container() -> dict[str, Any]:
    """The installer container of the manifest's Deployment, and its pod spec's volumes under ``volumes``."""
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return {**container, "volumes": pod["volumes"]}


class ContainerOperator(LogFollower):
    """``podman run`` of the installer image in the foreground of a detached podman client, its output (the pod's
    log: shell-operator's JSON lines) appended to ``log_path``."""

    def __init__(self, image: str, server: str, token: str, ca_pem: str, root: Path) -> None:
        self.image, self.server, self.token, self.ca_pem = image, server, token, ca_pem
        self.root = root
        self.name = "ks-demo-" + re.sub(r"[^a-z0-9]+", "-", str(root.resolve()).lower()).strip("-")[-40:]
        self.popen: subprocess.Popen[bytes] | None = None
        self.what, self.poll_seconds = "the installer container", 0.5

    @property
    def log_path(self) -> Path:
        return self.root / "shell-operator" / "shell-operator.log"

    @property
    def base_dir(self) -> Path:
        """The host directory mounted at /kubesphere (the manifest's emptyDir ``kubesphere``)."""
        return self.root / "kubesphere"

    def _prepare(self) -> Path:
        """The ServiceAccount's files as the kubelet projects them, readable by the container's user only."""
        sa = self.root / "serviceaccount"
        sa.mkdir(parents=True, exist_ok=True)
        for name, text in (("token", self.token), ("ca.crt", self.ca_pem), ("namespace", "kubesphere-system")):
            (sa / name).write_text(text)
            (sa / name).chmod(0o400)
        for path in (sa, *sa.iterdir()):
            path.chmod(0o500 if path.is_dir() else 0o400)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        for path in (sa, *sa.iterdir(), self.base_dir, *self.base_dir.rglob("*")):
            os.chown(path, UID, UID)
        return sa

    def argv(self, sa: Path, listen_port: int) -> list[str]:
        container = deployment_container()
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        empty = {v["name"] for v in container["volumes"] if "emptyDir" in v}
        read_only = (container.get("securityContext") or {}).get("readOnlyRootFilesystem", False)
        host, port = re.fullmatch(r"https://([^:]+):(\d+)", self.server).groups()  # type: ignore[union-attr]
        nofile = min(int(subprocess.run(["bash", "-c", "ulimit -Hn"], capture_output=True, text=True).stdout), 65536)
        argv = ["bash", str(IMAGE_SH), "podman", "run", "--rm", "--name", self.name, "--network", "host",
                "--user", f"{UID}:{UID}", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                # explicit limits: podman's defaults raise them, which this machine refuses
                "--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=8192:8192",
                "-v", f"{sa}:{SA_DIR}:ro", "-e", f"KUBERNETES_SERVICE_HOST={host}",
                "-e", f"KUBERNETES_SERVICE_PORT={port}",
                # host network: the pod's port 9115 may be taken here
                "-e", f"SHELL_OPERATOR_LISTEN_PORT={listen_port}"]
        if read_only:
            argv += ["--read-only", "--read-only-tmpfs=false"]
        for path, name in mounts.items():
            if name not in empty:
                continue  # host-time and the like: the host's own files
            if path == "/kubesphere":
                argv += ["-v", f"{self.base_dir}:{path}"]
            else:
                argv += ["--tmpfs", f"{path}:rw,mode=1777"]
        for env in container.get("env") or []:
            argv += ["-e", f"{env['name']}={env['value']}"]
        return [*argv, self.image]

    def start(self) -> ContainerOperator:
        podman("rm", "-f", "-t", "5", self.name, check=False)  # one left by a killed demo
        sa = self._prepare()
        self.listen_port = free_ports(1)[0]
        self.popen = spawn(self.argv(sa, self.listen_port), self.log_path)
        return self

    def record(self, started: float) -> dict[str, Any]:
        assert self.popen is not None
        return {"pid": self.popen.pid, "container": self.name, "image": self.image, "log": str(self.log_path),
                "started": started}


def exec_in(name: str, *argv: str) -> str:
    """``podman exec`` in the demo's installer container: its stdout."""
    return podman("exec", name, *argv).stdout


def stop(name: str) -> None:
    """Stop the installer container as a pod is stopped (SIGTERM, then SIGKILL after 15 s)."""
    podman("rm", "-f", "-t", "15", name, check=False)
