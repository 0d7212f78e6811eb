"""The hook's fast path on real objects: an event that needs nothing is settled from shell-operator's snapshots
(the cc and the state Secret as the API returns them) without the Kubernetes client, and only refreshes the
observed generation through the patch file; a stale snapshot or a due retry goes to the full reconcile."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from simcluster import tool_path

from installer.hook import SCHEDULE_BINDING, SPEC_BINDING, STATE_BINDING
from installer.settings import NAMESPACE, STATE_SECRET

from .conftest import REPO, Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"
BOX = "###              Welcome to KubeSphere!           ###"


def live(installer: Installer, kind: str, name: str) -> dict[str, Any]:
    out = subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={installer.kubeconfig}", "get", kind, name,
                          "-n", NAMESPACE, "-o", "json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def run_hook(installer: Installer, tmp: Path, binding: str, cc: dict[str, Any], secret: dict[str, Any],
             ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    context = [{"binding": binding, "type": "Schedule" if binding == SCHEDULE_BINDING else "Event",
                "snapshots": {SPEC_BINDING: [{"object": cc}], STATE_BINDING: [{"object": secret}]}}]
    (tmp / "context.json").write_text(json.dumps(context))
    patch = tmp / "patch.jsonl"
    patch.unlink(missing_ok=True)
    # The hook's own process (no warm engine, KS_WARM_ENGINE=0): what it imports is what these tests look at.
    proc = subprocess.run([sys.executable, "-X", "importtime", str(HOOK)], capture_output=True, text=True,
                          timeout=600, env=installer.environ(BINDING_CONTEXT_PATH=str(tmp / "context.json"),
                                                            KUBERNETES_PATCH_PATH=str(patch), KS_WARM_ENGINE="0"))
    ops = [json.loads(line) for line in patch.read_text().splitlines()] if patch.exists() else []
    return proc, ops


def client_loaded(proc: subprocess.CompletedProcess[str]) -> bool:
    return any(re.search(r"\|\s+kubernetes$", line.rstrip()) for line in proc.stderr.splitlines())


def test_noop_edit_is_settled_from_the_snapshots(installer: Installer, tmp_path: Path) -> None:
    installer.apply_cc()
    installer.reconcile_ok()
    # An edit that changes no input (2Gi is the default): a new generation, nothing to run.
    installer.apply_cc(common__redis={"enabled": False, "volumeSize": "2Gi"})
    cc, secret = installer.cc(), live(installer, "secret", STATE_SECRET)
    generation = cc["metadata"]["generation"]
    assert cc["status"]["observedGeneration"] == generation - 1

    proc, ops = run_hook(installer, tmp_path, SPEC_BINDING, cc, secret)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not client_loaded(proc)
    # Its first step, before the patch file is applied (here it never is): Ready Unknown at the new generation.
    assert f"Generation {generation} is not reconciled yet: Ready is Unknown until it is" in proc.stderr
    ready = next(c for c in installer.cc()["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("Unknown", "Progressing", generation)
    assert "Plan: nothing to do" in proc.stderr and "Reconcile finished, Ready: 4 modules installed" in proc.stderr
    assert "Settled from shell-operator's snapshots" in proc.stderr
    # The edit's run ends with the welcome box, as upstream's every run: the one the full reconcile wrote, restamped.
    running = installer.results.parent / "playbooks" / "kubesphere_running"
    assert BOX in proc.stderr and proc.stderr.index(BOX) < proc.stderr.index("Reconcile finished, Ready")
    assert next(ln for ln in running.read_text().splitlines() if ln.startswith("https://")) in proc.stderr
    (op,) = ops
    assert (op["operation"], op["kind"], op["name"], op["subresource"]) == (
        "MergePatch", "ClusterConfiguration", "ks-installer", "status")
    status = op["mergePatch"]["status"]
    assert status["observedGeneration"] == generation
    assert {c["type"]: (c["status"], c["observedGeneration"]) for c in status["conditions"]}["Ready"] == (
        "True", generation)
    settled = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert settled["lastTransitionTime"] >= ready["lastTransitionTime"]  # True again after the Unknown

    # The schedule with no retry and no drift check due: settled, nothing written.
    installer.patch_status({"lastDriftCheck": "2999-01-01T00:00:00Z"})
    proc, ops = run_hook(installer, tmp_path, SCHEDULE_BINDING, installer.cc(), secret)
    assert proc.returncode == 0 and not client_loaded(proc) and ops == []
    assert "Welcome to KubeSphere" not in proc.stderr  # a tick every minute: no box

    # A state Secret the status was not written after (a snapshot older than the last reconcile): full path.
    stale = {**secret, "metadata": {**secret["metadata"], "resourceVersion": "1"}}
    proc, ops = run_hook(installer, tmp_path, SPEC_BINDING, installer.cc(), stale)
    assert proc.returncode == 0 and client_loaded(proc), proc.stderr[-2000:]
    assert ops == [] and installer.cc()["status"]["observedGeneration"] == generation


def test_a_cc_deleted_and_created_again_gets_its_status_back_without_a_run(installer: Installer) -> None:
    """``kubectl delete cc`` then the same cc again: nothing is installed again (the state stays), and the status
    says what is installed — upstream's ``status.<component>`` keys and each module's phase — at once."""
    from installer.config import prepare
    from installer.modules import MODULES
    from installer.settings import CC_GROUP, CC_NAME, CC_PLURAL, CC_VERSION

    spec = installer.cc()["spec"]
    before = installer.status()
    assert before["core"]["status"] == "enabled", before.get("core")
    installer.custom.delete_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE, CC_PLURAL, CC_NAME)
    installer.put_spec(spec)
    assert not installer.status()
    proc = installer.reconcile()
    assert installer.ran(proc) == [], proc.stderr[-3000:]
    after = installer.status()
    prepared = prepare(spec).spec  # what the installed modules say "enabled" for: the registry's status keys
    installed = {k for m in MODULES if m.enabled(prepared) for k, on in m.status_keys(prepared).items() if on}
    assert {"core", "monitoring"} <= installed, installed
    assert {k for k, v in after.items() if isinstance(v, dict) and v.get("status") == "enabled"} == installed
    enabled = {m.name for m in MODULES if m.enabled(prepared)}
    assert {m: s["phase"] for m, s in after["modules"].items()} == dict.fromkeys(enabled, "Installed")
    assert installer.condition("Ready")["status"] == "True", installer.condition("Ready")
