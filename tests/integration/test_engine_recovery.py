"""The engine after things go wrong: killed or stopped runs, failed upgrades, trimmed specs, drift, a stale
lease, corrupt state. Each case is driven through the real reconcile against the real apiserver."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_zygote import ENGINE
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.engine.lease import Lease
from installer.settings import LEASE_NAME, NAMESPACE, STATE_SECRET
from installer.version import INSTALLER_VERSION

from .conftest import REPO, Installer, kill_tree, playbooks_changed, stored_state

pytestmark = pytest.mark.cluster
WEAVE = {"networkpolicy": {"enabled": False}, "ippool": {"type": "none"}, "topology": {"type": "weave-scope"}}
NO_WEAVE = {"networkpolicy": {"enabled": False}, "ippool": {"type": "none"}, "topology": {"type": "none"}}
HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"


def playbooks_with(tmp_path: Path, module: str, task: dict) -> Path:
    """A copy of the playbooks where ``module``'s install ends with ``task`` (after its roles applied)."""
    return playbooks_changed(tmp_path, module, post_tasks=[task])


SLOW = {"name": "Slow | Wait", "ansible.builtin.pause": {"seconds": 600}}
FAIL = {"name": "Broken | Fail after applying", "ansible.builtin.fail": {"msg": "broken on purpose"}}


def start_until(installer: Installer, marker: str) -> subprocess.Popen[str]:
    """Start a reconcile and return once its log shows ``marker``."""
    proc = subprocess.Popen([sys.executable, "-m", "installer", "reconcile"], env=installer.environ(),
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + 300
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if marker in line:
            return proc
        assert time.monotonic() < deadline, "".join(seen[-40:])
    raise AssertionError(f"reconcile ended before {marker!r}:\n{''.join(seen[-40:])}")


def kubesphere_config(installer: Installer) -> str:
    cm = client.CoreV1Api(installer.api).read_namespaced_config_map("kubesphere-config", NAMESPACE)
    return cm.data["kubesphere.yaml"]


@pytest.mark.platform
def test_killed_install_then_disabled_is_uninstalled(installer: Installer, tmp_path: Path) -> None:
    installer.apply_cc()
    installer.reconcile_ok()
    installer.apply_cc(network=WEAVE)
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_with(tmp_path, "network", SLOW))
    proc = start_until(installer, "Slow | Wait")
    kill_tree(proc.pid)
    proc.wait()
    assert "network" in installer.module_objects()  # half-applied
    assert installer.status()["modules"]["network"]["phase"] == "Installing"
    ready = installer.condition("Ready")  # kubectl get cc's READY while the installer is dead mid-run
    assert (ready["status"], ready["reason"]) == ("Unknown", "Progressing") and "install network" in ready["message"]
    assert ready["observedGeneration"] == installer.cc()["metadata"]["generation"]

    del installer.env["KS_PLAYBOOKS_DIR"]
    installer.apply_cc(network=NO_WEAVE)
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Start uninstalling network" in proc.stderr
    assert "network" not in installer.module_objects()
    assert "network" not in stored_state(installer)
    assert installer.status()["modules"]["network"]["phase"] == "Uninstalled"
    assert "weaveScopeHost" not in kubesphere_config(installer)
    assert installer.condition("Ready")["status"] == "True"


@pytest.mark.platform
def test_failed_upgrade_then_revert_runs_again(installer: Installer, tmp_path: Path) -> None:
    installer.apply_cc()
    installer.reconcile_ok()
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_with(tmp_path, "monitoring", FAIL))
    installer.apply_cc(monitoring={"node_exporter": {"port": 9101}})
    proc = installer.reconcile()
    assert proc.returncode == 1 and installer.status()["modules"]["monitoring"]["phase"] == "Failed"
    core = client.CoreV1Api(installer.api)

    def exporter_port() -> int:
        return core.read_namespaced_service("node-exporter", "kubesphere-monitoring-system").spec.ports[0].port

    assert exporter_port() == 9101  # what the failed run applied

    del installer.env["KS_PLAYBOOKS_DIR"]
    installer.apply_cc()  # back to the spec (and code) of the last successful run
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert installer.ran(proc) == ["monitoring"]
    assert "[monitoring] its last upgrade did not finish (failed)" in proc.stderr
    assert exporter_port() == 9100
    assert installer.status()["modules"]["monitoring"]["phase"] == "Installed"
    assert installer.condition("Ready")["status"] == "True"


@pytest.mark.platform
def test_absent_section_keeps_modules_until_explicitly_disabled(installer: Installer) -> None:
    installer.apply_cc(logging={"enabled": True, "logsidecar": {"enabled": True, "replicas": 2}},
                       gatekeeper={"enabled": True})
    installer.reconcile_ok()
    optional = {"fluentbit", "gatekeeper", "logging", "opensearch"}
    assert optional <= set(installer.module_objects())

    trimmed = installer.cc()["spec"]
    del trimmed["logging"], trimmed["gatekeeper"]
    installer.put_spec(trimmed)
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Start uninstalling" not in proc.stderr
    assert optional <= set(installer.module_objects())
    assert "[gatekeeper] kept: spec.gatekeeper.enabled is absent (last applied: true); set gatekeeper.enabled: " \
           "false to uninstall" in proc.stderr
    modules = installer.status()["modules"]
    assert modules["opensearch"]["message"].startswith("kept: spec.logging.enabled is absent")
    assert modules["logging"]["phase"] == "Installed"
    assert installer.condition("Ready")["status"] == "True"
    plan = subprocess.run([*ENGINE, "plan"], env=installer.environ(), capture_output=True,
                          text=True, check=True).stdout
    assert "logging: kept: spec.logging.enabled is absent" in plan

    installer.put_spec({**trimmed, "logging": {"enabled": False}, "gatekeeper": {"enabled": False}})
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(installer.ran(proc)) >= optional
    assert not installer.leftovers(*optional)


@pytest.mark.platform
def test_missing_state_secret_uninstalls_nothing(installer: Installer) -> None:
    installer.apply_cc(gatekeeper={"enabled": True})
    installer.reconcile_ok()
    client.CoreV1Api(installer.api).delete_namespaced_secret(STATE_SECRET, NAMESPACE)
    installer.apply_cc(gatekeeper={"enabled": False})
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Start uninstalling" not in proc.stderr
    assert "gatekeeper" in installer.module_objects()


def hook_tick(installer: Installer, tmp_path: Path, binding: str = "Retry failed modules",
              **env: str) -> subprocess.CompletedProcess[str]:
    """Run the hook as shell-operator does for one event of ``binding``."""
    context = tmp_path / "context.json"
    context.write_text(json.dumps([{"binding": binding, "type": "Schedule"}]))
    return subprocess.run([sys.executable, str(HOOK)], env=installer.environ(BINDING_CONTEXT_PATH=str(context),
                                                                            **env),
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.platform
def test_drift_is_found_on_the_schedule_and_repaired(installer: Installer, tmp_path: Path) -> None:
    installer.apply_cc()
    installer.reconcile_ok()
    quiet = hook_tick(installer, tmp_path, KS_DRIFT_INTERVAL="0")
    assert quiet.returncode == 0 and "Drift" not in quiet.stderr and "Start " not in quiet.stderr, quiet.stderr
    assert installer.status()["lastDriftCheck"]
    # not due yet: the schedule tick does nothing
    idle = hook_tick(installer, tmp_path, KS_DRIFT_INTERVAL="3600")
    assert idle.returncode == 0 and idle.stderr == ""

    core = client.CoreV1Api(installer.api)
    core.delete_namespaced_service("kube-state-metrics", "kubesphere-monitoring-system")
    core.patch_namespaced_config_map("kubesphere-config", NAMESPACE, {"data": {"kubesphere.yaml": "edited: true\n"}},
                                     field_manager="kubectl-edit")
    proc = hook_tick(installer, tmp_path, KS_DRIFT_INTERVAL="0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Drift in monitoring: Service/kubesphere-monitoring-system/kube-state-metrics missing" in proc.stderr
    assert "Drift in ks-config: ConfigMap/kubesphere-system/kubesphere-config changed by kubectl-edit" in proc.stderr
    assert installer.ran(proc) == ["ks-config", "monitoring"]
    core.read_namespaced_service("kube-state-metrics", "kubesphere-monitoring-system")
    assert "authentication" in kubesphere_config(installer)
    status = installer.status()
    assert not status.get("drift") and installer.condition("Ready")["status"] == "True"
    again = hook_tick(installer, tmp_path, KS_DRIFT_INTERVAL="0")
    assert "Drift" not in again.stderr and "Start " not in again.stderr, again.stderr


@pytest.mark.platform
def test_schedule_retries_a_failed_module_once_its_backoff_expired(installer: Installer, tmp_path: Path) -> None:
    installer.apply_cc()
    installer.reconcile_ok()
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_with(tmp_path, "monitoring", FAIL))
    installer.apply_cc(monitoring={"node_exporter": {"port": 9102}})
    installer.reconcile()
    assert installer.status()["modules"]["monitoring"]["attempts"] == 1
    not_due = hook_tick(installer, tmp_path, KS_DRIFT_INTERVAL="3600")
    assert "Start " not in not_due.stderr
    installer.patch_status({"modules": {"monitoring": {"nextRetryTime": "2000-01-01T00:00:00Z"}}})
    retry = hook_tick(installer, tmp_path, KS_DRIFT_INTERVAL="3600")
    assert "Retrying modules whose backoff expired: monitoring" in retry.stderr
    assert installer.ran(retry) == ["monitoring"]
    assert installer.status()["modules"]["monitoring"]["attempts"] == 2


@pytest.mark.platform
def test_sigterm_stops_and_the_next_run_resumes(installer: Installer, tmp_path: Path) -> None:
    installer.apply_cc()
    installer.reconcile_ok()
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_with(tmp_path, "network", SLOW))
    installer.apply_cc(network=WEAVE, gatekeeper={"enabled": True})
    installer.env["KS_MAX_PARALLEL"] = "1"  # gatekeeper waits behind network, so it is not started
    proc = start_until(installer, "Slow | Wait")
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) == 1
    modules = installer.status()["modules"]
    assert modules["network"]["phase"] == "Interrupted"
    assert "attempts" not in modules["network"] and "nextRetryTime" not in modules["network"]
    ready = installer.condition("Ready")
    assert ready["status"] == "False" and ready["reason"] == "Interrupted"
    assert stored_state(installer)["network"]["intent"]["outcome"] == "interrupted"

    del installer.env["KS_PLAYBOOKS_DIR"], installer.env["KS_MAX_PARALLEL"]
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {"network", "gatekeeper"} <= set(installer.ran(proc))
    assert installer.status()["modules"]["network"]["phase"] == "Installed"
    assert installer.condition("Ready")["status"] == "True"


@pytest.mark.platform
def test_lease_of_a_dead_installer_is_taken_over_at_once(installer: Installer) -> None:
    installer.apply_cc()
    coord = client.CoordinationV1Api(installer.api)
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    dead = f"{socket.gethostname()}/{2**22 + 17}/12345"  # no such process on this host
    with contextlib.suppress(ApiException):  # the released lease of the platform's last reconcile
        coord.delete_namespaced_lease(LEASE_NAME, NAMESPACE)
    coord.create_namespaced_lease(NAMESPACE, {"metadata": {"name": LEASE_NAME}, "spec": {
        "holderIdentity": dead, "leaseDurationSeconds": 3600, "renewTime": now, "acquireTime": now}})
    # Held for an hour: a run that waited for it to expire would outlast the reconcile's 600 s timeout.
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Taking over the lease of {dead}" in proc.stderr
    assert coord.read_namespaced_lease(LEASE_NAME, NAMESPACE).spec.holder_identity is None  # released


@pytest.mark.platform
def test_a_live_holder_keeps_the_lease_and_a_lost_lease_is_noticed(installer: Installer) -> None:
    installer.apply_cc()
    mine = Lease(installer.api)  # held by this (live) process
    mine.acquire()
    proc = installer.reconcile()
    assert proc.returncode == 1 and "another reconcile is running" in proc.stderr
    assert "Start " not in proc.stderr and "Traceback" not in proc.stderr

    # Someone else writes the lease: this holder's next renewal fails on the resourceVersion and it stops.
    lost = []
    mine.on_lost = lambda: lost.append(True)
    coord = client.CoordinationV1Api(installer.api)
    coord.patch_namespaced_lease(LEASE_NAME, NAMESPACE, {"spec": {"holderIdentity": "other-host/1/1"}})
    mine.renew()
    assert mine.lost and lost
    mine.release()  # a lost lease is not released over the new holder
    assert coord.read_namespaced_lease(LEASE_NAME, NAMESPACE).spec.holder_identity == "other-host/1/1"


@pytest.mark.platform
def test_corrupt_state_is_stalled_and_repairable(installer: Installer) -> None:
    installer.apply_cc(gatekeeper={"enabled": True})
    installer.reconcile_ok()
    objects = installer.module_objects()
    core = client.CoreV1Api(installer.api)
    core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": {
        "gatekeeper": base64.b64encode(b"{not json").decode()}})
    installer.apply_cc(gatekeeper={"enabled": False})
    proc = installer.reconcile()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert installer.ran(proc) == [] and installer.module_objects() == objects
    stalled = installer.condition("Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "StateUnreadable"
    assert f"Secret {NAMESPACE}/{STATE_SECRET}, key 'gatekeeper'" in stalled["message"]
    assert "python -m installer state reset" in stalled["message"]
    for command in (["plan"], ["images"]):  # the same error as the reconcile's, not a traceback
        shown = subprocess.run([*ENGINE, *command], env=installer.environ(), capture_output=True, text=True)
        assert shown.returncode == 2 and "Traceback" not in shown.stderr, shown.stderr[-2000:]
        assert f"state is unreadable: Secret {NAMESPACE}/{STATE_SECRET}, key 'gatekeeper'" in shown.stderr

    def state(*args: str) -> str:
        return subprocess.run([*ENGINE, "state", *args], env=installer.environ(),
                              capture_output=True, text=True, check=True).stdout

    shown = state("show")
    assert "gatekeeper: '<unreadable: JSONDecodeError" in shown and "ks-core:" in shown
    assert "jwtSecret" not in shown or "<redacted>" in shown
    state("reset", "--module", "gatekeeper")
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert installer.condition("Stalled")["status"] == "False"
    assert "Start uninstalling" not in proc.stderr  # no record of installing it: left alone


@pytest.mark.platform
def test_the_schedule_reports_an_unreadable_state_as_an_edit_does(installer: Installer, tmp_path: Path) -> None:
    """No edit comes: the minute's tick stalls on the state with the edit's message and log line, and clears it
    once the state is repaired."""
    installer.apply_cc()
    installer.reconcile_ok()
    core = client.CoreV1Api(installer.api)
    core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": {"redis": base64.b64encode(b"{not json").decode()}})
    message = f"the installer's state is unreadable: Secret {NAMESPACE}/{STATE_SECRET}, key 'redis'"
    try:
        ticks = [hook_tick(installer, tmp_path, KS_DRIFT_INTERVAL="3600") for _ in range(2)]  # no drift check due
        for tick in ticks:
            assert tick.returncode == 0 and "Traceback" not in tick.stderr, tick.stderr[-3000:]
            assert message in tick.stderr and installer.ran(tick) == [], tick.stderr[-3000:]
        stalled = installer.condition("Stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "StateUnreadable") and message in stalled["message"]
        assert installer.condition("Ready")["status"] == "False"
        edit = hook_tick(installer, tmp_path, binding="Monitor clusterconfiguration")
        assert installer.condition("Stalled")["message"] == stalled["message"]
        said = [line for line in ticks[0].stderr.splitlines() if message in line]
        assert said and said == [line for line in edit.stderr.splitlines() if message in line]
    finally:
        core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": {"redis": None}})
    repaired = hook_tick(installer, tmp_path, KS_DRIFT_INTERVAL="3600")
    assert repaired.returncode == 0 and installer.ran(repaired) == [], repaired.stderr[-3000:]
    assert installer.condition("Stalled")["status"] == "False" and installer.condition("Ready")["status"] == "True"


@pytest.mark.platform
def test_new_installer_version_alone_runs_nothing(installer: Installer) -> None:
    """An installer upgrade that changes no module's code (here: only its version) runs no playbook."""
    installer.apply_cc()
    installer.reconcile_ok()
    bump = ("import sys, installer.version as v; v.INSTALLER_VERSION = '9.9.9'; from installer.cli import main; "
            "sys.exit(main(['reconcile']))")
    proc = subprocess.run([sys.executable, "-c", bump], env=installer.environ(), capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert installer.ran(proc) == [] and "Plan: nothing to do" in proc.stderr


def test_state_of_an_older_installer_moves_forward_and_a_newer_ones_is_refused(installer: Installer) -> None:
    """Our own upgrades: a state Secret in an older format (an installer before format numbers: no ``_format``)
    is read, runs nothing that did not change and is rewritten in this format; one that a newer installer wrote is
    refused, changing nothing, until that installer runs again."""
    installer.apply_cc()
    installer.reconcile_ok()
    core = client.CoreV1Api(installer.api)
    assert {k: v for k, v in stored_state(installer).items() if k in ("_format", "_writer")} == {
        "_format": 2, "_writer": INSTALLER_VERSION}
    core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": {"_format": None, "_writer": None}})
    installer.apply_cc(metrics_server={"enabled": True})
    assert installer.reconcile_ok() == ["metrics_server"]
    assert stored_state(installer)["_format"] == 2
    objects = installer.module_objects()

    newer = {"_format": base64.b64encode(b"3").decode(), "_writer": base64.b64encode(b'"9.9.9"').decode()}
    core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": newer})
    installer.apply_cc(metrics_server={"enabled": False})
    proc = installer.reconcile()
    assert proc.returncode == 1 and installer.ran(proc) == [] and installer.module_objects() == objects
    stalled = installer.condition("Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "StateFromNewerInstaller"
    assert "written by ks-installer 9.9.9 in state format 3" in stalled["message"]
    assert "a downgrade is refused" in stalled["message"] and "a downgrade is refused" in proc.stderr
    assert stored_state(installer)["_format"] == 3  # left as the newer installer wrote it
    shown = installer.cli("plan")
    assert shown.returncode == 2 and "a downgrade is refused" in shown.stderr and "Traceback" not in shown.stderr


@pytest.mark.platform
def test_in_a_pod_a_holder_whose_pod_is_gone_is_dead(installer: Installer, monkeypatch: pytest.MonkeyPatch) -> None:
    core = client.CoreV1Api(installer.api)
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="ks-installer-live", labels={"app": "lease-test"}),
                       spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]))
    core.create_namespaced_pod(NAMESPACE, pod)
    try:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")  # as in the installer's pod
        lease = Lease(installer.api)
        assert lease._holder_gone("ks-installer-gone-5d9c/17/4242")
        assert not lease._holder_gone("ks-installer-live/17/4242")
    finally:
        core.delete_namespaced_pod("ks-installer-live", NAMESPACE, grace_period_seconds=0)
