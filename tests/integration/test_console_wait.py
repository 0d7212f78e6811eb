"""A reconcile that waits for the console (to write kubesphere_running and the welcome box) stops on SIGTERM at
once instead of holding the pod's shutdown for the whole console timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from simcluster import SimCluster

from installer.settings import NAMESPACE

from .conftest import Installer

pytestmark = pytest.mark.cluster


def test_sigterm_ends_the_wait_for_the_console(platform: Installer, sim_cluster: SimCluster) -> None:
    installer = platform
    # The console cannot become Available: its new pods fit no node. The field belongs to another manager (as a
    # user's `kubectl patch` would), so the installer's apply keeps it: the test takes it back itself.
    sim_cluster.kubectl("-n", NAMESPACE, "patch", "deployment", "ks-console", "--type=merge", "-p",
                        json.dumps({"spec": {"template": {"spec": {"nodeSelector": {"ks-test/no-such-node": "x"}}}}}))
    try:
        _stop_while_waiting(installer)
    finally:
        sim_cluster.kubectl("-n", NAMESPACE, "patch", "deployment", "ks-console", "--type=json", "-p", json.dumps(
            [{"op": "remove", "path": "/spec/template/spec/nodeSelector/ks-test~1no-such-node"}]))
        sim_cluster.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/ks-console", "--timeout=120s")


def _stop_while_waiting(installer: Installer) -> None:
    running = installer.results.parent / "playbooks" / "kubesphere_running"
    running.unlink(missing_ok=True)  # a restarted pod: nothing to run, but the console is announced again
    proc = subprocess.Popen([sys.executable, "-m", "installer", "reconcile"],
                            env=installer.environ(KS_CONSOLE_TIMEOUT="600"), stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        time.sleep(8)  # the reconcile plans (nothing to run) and starts waiting for ks-console
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert time.monotonic() - sent < 15, "the console wait held the stop"
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Stopped waiting for the console" in stderr, stderr[-3000:]
    assert not running.exists()
