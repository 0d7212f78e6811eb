"""READY against the generation, watched on the real API server through an edit, an edit queued behind a running
reconcile and a kill: no status the installer writes says Ready True for a generation it has not reconciled
(kstatus: True only when the condition's observedGeneration is metadata.generation), and what `kubectl get cc`
shows carries the generation READY speaks of."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from simcluster import tool_path

from installer.objects.cluster import ClusterConfigurations
from installer.settings import CC_GROUP, CC_NAME, CC_PLURAL, CC_VERSION, NAMESPACE

from .conftest import REPO, Installer, kill_tree, playbooks_changed

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"


def _ready(obj: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})


@contextmanager
def watched(installer: Installer) -> Iterator[list[dict[str, Any]]]:
    """Every version of the cc the API server sends while the block runs (a watch misses no write)."""
    custom = client.CustomObjectsApi(installer.api)
    start = custom.get_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE, CC_PLURAL, CC_NAME)
    seen: list[dict[str, Any]] = [start]
    stop = threading.Event()

    def follow() -> None:
        version = start["metadata"]["resourceVersion"]
        while not stop.is_set():
            stream = watch.Watch()
            for event in stream.stream(custom.list_namespaced_custom_object, CC_GROUP, CC_VERSION, NAMESPACE,
                                       CC_PLURAL, field_selector=f"metadata.name={CC_NAME}",
                                       resource_version=version, timeout_seconds=1):
                seen.append(event["object"])
                version = event["object"]["metadata"]["resourceVersion"]

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        time.sleep(0.5)  # the last writes reach the watch
        stop.set()
        thread.join(timeout=10)


def written_statuses(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The versions whose status differs from the version before: what the installer wrote."""
    return [obj for before, obj in itertools.pairwise(seen) if obj.get("status") != before.get("status")]


def lies(seen: list[dict[str, Any]]) -> list[str]:
    """Written statuses that say Ready True about a generation other than the cc's."""
    out = []
    for obj in written_statuses(seen):
        ready, generation = _ready(obj), obj["metadata"]["generation"]
        if ready.get("status") == "True" and (ready.get("observedGeneration"), obj["status"].get(
                "observedGeneration")) != (generation, generation):
            out.append(f"generation {generation}: Ready True observed at {ready.get('observedGeneration')}")
    return out


def first_write_after_edit(seen: list[dict[str, Any]], generation: int) -> dict[str, Any]:
    """The first status written after the cc reached ``generation``."""
    at = next(i for i, obj in enumerate(seen) if obj["metadata"]["generation"] == generation)
    return next(obj for obj in written_statuses(seen[at:]))


def edit(installer: Installer, timeout: int) -> None:
    """A user's edit as a merge patch (no resourceVersion: the installer writes the status meanwhile)."""
    installer.custom.patch_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE, CC_PLURAL, CC_NAME,
                                                    {"spec": {"terminal": {"timeout": timeout}}})


class Hook:
    """The hook as shell-operator starts it (no binding context: the full reconcile), its log read as it goes."""

    def __init__(self, installer: Installer, **env: str) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, str(HOOK)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True, env=installer.environ(**env))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert self.proc.poll() is None or self.reader.is_alive(), "".join(self.lines)[-3000:]
            assert time.monotonic() < deadline, f"no {text!r} in:\n" + "".join(self.lines)[-3000:]
            time.sleep(0.05)

    def finish(self) -> str:
        assert self.proc.wait(timeout=300) == 0, "".join(self.lines)[-3000:]
        self.reader.join(timeout=10)
        return "".join(self.lines)


def test_ready_is_never_true_for_a_generation_not_reconciled(installer: Installer, tmp_path: Path) -> None:
    slow = playbooks_changed(tmp_path, "ks-config", pre_tasks=[{"name": "Hold on", "ansible.builtin.wait_for":
                                                                 {"timeout": 3}}])
    generation = installer.cc()["metadata"]["generation"]
    with watched(installer) as seen:
        # An edit, and a second one while the first one's reconcile runs: that reconcile must not end True.
        edit(installer, 700)
        first = Hook(installer, KS_PLAYBOOKS_DIR=str(slow))
        first.wait_for("Start upgrading ks-config")
        edit(installer, 800)
        assert first.proc.poll() is None, "the reconcile ended before the second edit: nothing was queued"
        log = first.finish()
        assert f"generation {generation + 2} is not reconciled yet, Ready Unknown" in log
        ready, status = installer.condition("Ready"), installer.status()
        assert (ready["status"], ready["reason"], status["observedGeneration"]) == ("Unknown", "Progressing",
                                                                                    generation + 1)
        assert "Reconcile finished, Ready" in Hook(installer).finish()
        assert installer.condition("Ready")["observedGeneration"] == generation + 2

        # An edit whose reconcile is killed once it has planned: READY stays not True, in kubectl get cc too.
        edit(installer, 900)
        killed = Hook(installer)
        killed.wait_for("Plan:")
        kill_tree(killed.proc.pid)
        killed.proc.wait(timeout=30)
        shown = subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={installer.kubeconfig}", "get", "cc",
                                CC_NAME, "-n", NAMESPACE, "--no-headers", "-o",
                                "custom-columns=R:.status.conditions[?(@.type==\"Ready\")].status"],
                               capture_output=True, text=True, check=True).stdout.split()
        assert shown == ["Unknown"]
        table = subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={installer.kubeconfig}", "get", "cc",
                                CC_NAME, "-n", NAMESPACE], capture_output=True, text=True, check=True).stdout
        header, row = (line.split() for line in table.splitlines()[:2])
        columns = dict(zip(header, row, strict=False))
        assert (columns["READY"], columns["GENERATION"], columns["OBSERVED"]) == (
            "Unknown", str(generation + 3), str(generation + 3)), table
        # (The next test's platform fixture reconciles it back.)

    assert lies(seen) == []
    for edited in (generation + 1, generation + 3):  # the first status written after an edit takes READY's True
        assert _ready(first_write_after_edit(seen, edited)).get("status") != "True"
    assert any(_ready(obj).get("status") == "True" and obj["metadata"]["generation"] == generation + 2
               for obj in written_statuses(seen))


def test_a_guarded_status_write_is_refused_once_the_cc_changed(installer: Installer) -> None:
    ccs = ClusterConfigurations(installer.api)
    read = installer.cc()["metadata"]["resourceVersion"]
    ccs.set_annotation("example.com/touched", "yes")  # any write moves the resourceVersion on
    try:
        assert not ccs.patch_status_at({"guardCheck": "from a stale read"}, read)
        assert "guardCheck" not in installer.status()
        fresh = installer.cc()["metadata"]["resourceVersion"]
        assert ccs.patch_status_at({"guardCheck": "from a fresh read"}, fresh)
        assert installer.status()["guardCheck"] == "from a fresh read"
    finally:
        ccs.set_annotation("example.com/touched", None)
        installer.patch_status({"guardCheck": None})


WAIT = ["wait", f"cc/{CC_NAME}", "-n", NAMESPACE]
"""docs/ready.md's `kubectl wait` (each form's --for and --timeout follow)."""


def kubectl(installer: Installer, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={installer.kubeconfig}", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_kubectl_wait_waits_for_the_reconcile_of_an_edit_no_installer_has_seen(installer: Installer) -> None:
    """With no installer running, an edit leaves READY True at the older generation: the wait docs/ready.md gives
    does not take it, the status-only jsonpath form it warns against does; the wait returns once the edit is
    reconciled."""
    Hook(installer).finish()  # whatever an earlier test left: reconciled at the cc's generation
    generation = installer.cc()["metadata"]["generation"]
    assert kubectl(installer, *WAIT, "--for=condition=Ready", "--timeout=0s").returncode == 0

    edit(installer, 650)  # nothing runs the hook: no installer sees it
    table = kubectl(installer, "get", "cc", CC_NAME, "-n", NAMESPACE).stdout
    header, row = (line.split() for line in table.splitlines()[:2])
    columns = dict(zip(header, row, strict=False))
    assert (columns["READY"], columns["GENERATION"], columns["OBSERVED"]) == (
        "True", str(generation + 1), str(generation)), table
    waited = kubectl(installer, *WAIT, "--for=condition=Ready", "--timeout=3s")
    assert waited.returncode != 0 and "timed out" in waited.stderr, waited
    strict = kubectl(installer, *WAIT, f"--for=jsonpath={{.status.observedGeneration}}={generation + 1}",
                     "--timeout=3s")
    assert strict.returncode != 0 and "timed out" in strict.stderr, strict
    naive = kubectl(installer, *WAIT, '--for=jsonpath={.status.conditions[?(@.type=="Ready")].status}=True',
                    "--timeout=3s")
    assert naive.returncode == 0, naive  # the pitfall: it takes the True of the older generation

    waiting = subprocess.Popen([str(tool_path("kubectl")), f"--kubeconfig={installer.kubeconfig}", *WAIT,
                                "--for=condition=Ready", "--timeout=300s"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    assert waiting.poll() is None, waiting.communicate()
    assert "Reconcile finished, Ready" in Hook(installer).finish()
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and "condition met" in out, (out, err)
    assert installer.condition("Ready")["observedGeneration"] == generation + 1
    assert kubectl(installer, *WAIT, f"--for=jsonpath={{.status.observedGeneration}}={generation + 1}",
                   "--timeout=0s").returncode == 0
