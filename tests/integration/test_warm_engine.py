"""The hook through its warm engine (installer.launch.warm_engine) against the simulated cluster: an edit is
reconciled with the same log lines, status, results and timeline as the hook running the engine itself, and a
SIGTERM to the hook cancels the run as it cancels the hook's own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from installer.launch.warm_client import DIR_ENV, SWITCH_ENV
from installer.launch.warm_engine import engine_cpu

from .conftest import REPO, Installer, kill_tree, stored_state
from .test_engine_recovery import SLOW, WEAVE, playbooks_with

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"
#: The lines of the hook's log users read (upstream's), and the reconcile's last one.
CONTRACT = ("Start installing", "Start uninstalling", "task ", "Reconcile finished")


@pytest.fixture
def warm() -> Iterator[Path]:
    """The warm engine's directory for this test's hook runs (a short path: a socket's is at most 107 bytes); the
    warm engine the hook starts there is killed at the end."""
    root = Path(tempfile.mkdtemp(prefix="ks-we-"))
    yield root / "engine"
    found = engine_cpu(str(root / "engine"))
    if found:
        kill_tree(found[0])
    shutil.rmtree(root, ignore_errors=True)


def hook(installer: Installer, warm: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HOOK)], env=installer.environ(**{DIR_ENV: str(warm), **env}),
                          capture_output=True, text=True, timeout=600, check=False)


def start_warm_engine(installer: Installer, warm: Path) -> None:
    """A hook run with nothing to do starts the warm engine; wait until it listens."""
    first = hook(installer, warm)
    assert first.returncode == 0, first.stderr[-3000:]
    deadline = time.monotonic() + 120
    while not (warm / "s").exists():
        assert time.monotonic() < deadline, (warm / "engine.log").read_text() if (warm / "engine.log").exists() else ""
        time.sleep(0.1)


def served_runs(warm: Path) -> list[str]:
    """The warm engine's log lines of the runs it served."""
    return [line for line in (warm / "engine.log").read_text().splitlines() if " ended: exit code " in line]


def contract(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith(CONTRACT)]


def outcome(installer: Installer) -> dict[str, Any]:
    """What an edit leaves: module phases, conditions, the results files and the timeline's modules."""
    status = installer.status()
    timeline = json.loads((installer.results / "timeline.json").read_text())
    return {
        "phases": {name: m.get("phase") for name, m in status.get("modules", {}).items()},
        "conditions": {c["type"]: (c["status"], c.get("reason")) for c in status.get("conditions", [])},
        "results": sorted(p.name for p in installer.results.iterdir() if p.name != "timeline.json"),
        "timeline": sorted(m["module"] for m in timeline["modules"]),
    }


def test_an_edit_through_the_warm_engine_is_reconciled_as_by_the_hook_itself(installer: Installer,
                                                                              warm: Path) -> None:
    installer.apply_cc()
    installer.reconcile_ok()
    start_warm_engine(installer, warm)

    installer.apply_cc(metrics_server={"enabled": True})
    before = len(served_runs(warm))
    through = hook(installer, warm)
    assert through.returncode == 0, through.stderr[-3000:]
    assert len(served_runs(warm)) == before + 1, served_runs(warm)  # the warm engine ran it
    assert "Start installing metrics_server" in through.stderr
    warm_outcome = outcome(installer)
    assert warm_outcome["phases"]["metrics_server"] == "Installed"
    assert warm_outcome["conditions"]["Ready"][0] == "True"

    installer.apply_cc()
    installer.reconcile_ok()  # metrics_server uninstalled again
    installer.apply_cc(metrics_server={"enabled": True})
    itself = hook(installer, warm, **{SWITCH_ENV: "0"})
    assert itself.returncode == 0, itself.stderr[-3000:]
    assert len(served_runs(warm)) == before + 1  # not through the warm engine
    assert contract(through.stderr) == contract(itself.stderr)
    assert outcome(installer) == warm_outcome


def test_sigterm_to_the_hook_cancels_the_run_in_the_warm_engine(installer: Installer, warm: Path,
                                                                tmp_path: Path) -> None:
    installer.apply_cc()
    installer.reconcile_ok()
    start_warm_engine(installer, warm)
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_with(tmp_path, "network", SLOW))
    installer.env["KS_MAX_PARALLEL"] = "1"
    installer.apply_cc(network=WEAVE, gatekeeper={"enabled": True})
    proc = subprocess.Popen([sys.executable, str(HOOK)], env=installer.environ(**{DIR_ENV: str(warm)}),
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if "Slow | Wait" in line:
            break
    else:
        raise AssertionError("".join(seen[-40:]))
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) == 1
    proc.stderr.read()
    assert " ended: exit code 1, " in served_runs(warm)[-1]  # the run the warm engine forked
    modules = installer.status()["modules"]
    assert modules["network"]["phase"] == "Interrupted"
    assert "attempts" not in modules["network"]
    ready = installer.condition("Ready")
    assert ready["status"] == "False" and ready["reason"] == "Interrupted"
    assert stored_state(installer)["network"]["intent"]["outcome"] == "interrupted"

    del installer.env["KS_PLAYBOOKS_DIR"], installer.env["KS_MAX_PARALLEL"]
    installer.apply_cc()
    installer.reconcile()
