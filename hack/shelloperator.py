"""The real shell-operator binary, out of cluster, against a kubeconfig and a hooks dir (as in the pod).

    with ShellOperator(kubeconfig, hooks_dir, env={"KS_RESULTS_DIR": ...}) as so:
        so.wait_for_log(r"Kubernetes bindings for hook are enabled successfully")

shell-operator v1.6.1 logs one JSON object per line whatever ``--log-type`` says; hook stdout/stderr lines
appear in it too. jqFilter runs the ``jq`` binary from PATH.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from simcluster import SimClusterError, free_ports, kill_tree, log_tail, process_tree, spawn, tool_path

from installer.launch.warm_client import engine_dir
from installer.launch.warm_engine import engine_cpu


class LogFollower:
    """A process whose log a test or the demo waits on: ``log_path``, ``popen`` and ``what`` (for messages)."""

    what = "the process"
    poll_seconds = 0.2
    log_path: Path
    popen: subprocess.Popen[bytes] | None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def mark(self) -> int:
        """Current log size, to wait for lines written after this point."""
        return len(self.log_text())

    def wait_for_log(self, pattern: str, timeout: float = 60, since: int = 0) -> re.Match[str]:
        """Wait until ``pattern`` (regex, multiline) matches the log after offset ``since``."""
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.log_text(), since)
            if match:
                return match
            if not self.running():
                code = self.popen.returncode if self.popen else None
                raise SimClusterError(f"{self.what} exited ({code}) before logging /{pattern}/:\n"
                                      f"{log_tail(self.log_path)}")
            if time.monotonic() > deadline:
                raise SimClusterError(f"timed out after {timeout:.0f}s waiting for /{pattern}/ in "
                                      f"{self.log_path}:\n{log_tail(self.log_path)}")
            time.sleep(self.poll_seconds)


class ShellOperator(LogFollower):
    """``shell-operator start`` with every listener on loopback and its state in a private work dir."""

    def __init__(self, kubeconfig: Path | str, hooks_dir: Path | str, *, work_dir: Path | str | None = None,
                 env: Mapping[str, str] | None = None, path_prepend: Sequence[Path | str] = (),
                 log_level: str = "info", extra_args: Sequence[str] = (), die_with_parent: bool = True) -> None:
        self.kubeconfig = Path(kubeconfig).resolve()
        self.hooks_dir = Path(hooks_dir).resolve()
        self._own_work_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="ks-so-")).resolve()
        # unix socket paths are limited to 107 bytes
        self.debug_socket = self.work_dir / "debug.socket"
        if len(str(self.debug_socket)) > 100:
            self.debug_socket = Path(tempfile.mkdtemp(prefix="ks-so-")) / "debug.socket"
        self.extra_env = dict(env or {})
        self.path_prepend = [str(p) for p in path_prepend]
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self.die_with_parent = die_with_parent
        self.port = 0
        self.popen: subprocess.Popen[bytes] | None = None
        self.warm_dir: str | None = None
        self.what = "shell-operator"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "shell-operator.log"

    @property
    def tmp_dir(self) -> Path:
        return self.work_dir / "tmp"

    def argv(self) -> list[str]:
        """The command line; flags rather than env so a caller's SHELL_OPERATOR_* cannot redirect it."""
        return [
            str(tool_path("shell-operator")), "start",
            f"--kube-config={self.kubeconfig}",
            f"--hooks-dir={self.hooks_dir}",
            f"--tmp-dir={self.tmp_dir}",
            "--listen-address=127.0.0.1", f"--listen-port={self.port}",
            f"--debug-unix-socket={self.debug_socket}",
            "--validating-webhook-listen-address=127.0.0.1", "--conversion-webhook-listen-address=127.0.0.1",
            "--log-type=json", f"--log-level={self.log_level}",
            *self.extra_args,
        ]

    def environ(self) -> dict[str, str]:
        """Environment of shell-operator and so of its hooks: ours, KUBECONFIG, PATH with tools + this Python."""
        path = [*self.path_prepend, str(Path(sys.executable).parent), os.environ.get("PATH", "")]
        # As the installer manifest: hooks' JSON records on stdout keep their level (installer.hooklog).
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PATH": os.pathsep.join(path),
                "LOG_PROXY_HOOK_JSON": "true", **self.extra_env}

    def start(self) -> ShellOperator:
        """Start shell-operator; its combined output goes to ``log_path``."""
        if shutil.which("jq", path=self.environ()["PATH"]) is None:
            raise SimClusterError("jq is not on PATH; shell-operator needs it for jqFilter (apt-get install jq)")
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_ports(1)[0]
        self.popen = spawn(self.argv(), self.log_path, env=self.environ(), cwd=self.work_dir,
                           die_with_parent=self.die_with_parent)
        self.warm_dir = engine_dir(self.popen.pid)  # its hooks' warm engine's, named by its pid and start
        atexit.register(self.stop)
        return self

    def stop(self, timeout: float = 15) -> None:
        """Stop as a pod does: SIGTERM to shell-operator only, then after ``timeout`` SIGKILL to everything it
        started (hooks, ansible, ...); a temp work dir is removed."""
        atexit.unregister(self.stop)
        if self.popen is not None:
            tree = process_tree(self.popen.pid)
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=timeout)
            self._kill(tree)
        if self.debug_socket.parent != self.work_dir:
            shutil.rmtree(self.debug_socket.parent, ignore_errors=True)
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL shell-operator and everything under it at once (a pod kill / node crash)."""
        if self.popen is not None:
            self._kill(process_tree(self.popen.pid))

    def warm_engine_tree(self) -> list[tuple[int, str]]:
        """The warm engine the hooks started beside shell-operator (installer.launch.warm_engine) and its runs: in
        the pod they die with it; here they are a session of their own."""
        found = engine_cpu(self.warm_dir) if self.warm_dir else None
        return process_tree(found[0]) if found else []

    def _kill(self, tree: list[tuple[int, str]]) -> None:
        assert self.popen is not None
        tree += self.warm_engine_tree()
        tree += process_tree(self.popen.pid) if self.running() else []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        kill_tree(tree)
        self.popen.wait(timeout=10)

    def __enter__(self) -> ShellOperator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

