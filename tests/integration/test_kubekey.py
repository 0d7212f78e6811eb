"""What KubeKey does to the installer, on the simulated cluster: it ``kubectl apply``s the cc its template wrote
(tests/clients/kubekey), then waits as its Check task does (tests/clients/kubekey/check.sh: ``ls`` until
``/kubesphere/playbooks/kubesphere_running`` exists, then ``cat`` it) and prints the welcome box.

As upstream v3.4.1 (where result-info.yaml renders the file at the end of a run), the file appears only once every
module of the run has ended, is replaced whole on later runs (never absent or empty meanwhile), is written after a
failed pluggable module, and is not written after a failed module of upstream's core phase."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from simcluster import SimCluster

from installer.engine import timeline
from installer.hook import SCHEDULE_BINDING, SPEC_BINDING

from .conftest import Installer, playbooks_changed

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
KUBEKEY = REPO / "tests" / "clients" / "kubekey"
HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"
CHECK = KUBEKEY / "check.sh"
BOX = "###              Welcome to KubeSphere!           ###"
ETCD_SECRET = "kube-etcd-client-certs"


def running_file(installer: Installer) -> Path:
    return installer.results.parent / "playbooks" / "kubesphere_running"


@contextmanager
def kubekey_check(installer: Installer) -> Iterator[subprocess.Popen[str]]:
    """KubeKey's wait, polling in the background for the test's duration."""
    proc = subprocess.Popen(["sh", str(CHECK), str(installer.results.parent)], stdout=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def printed(check: subprocess.Popen[str]) -> str:
    """What KubeKey's check printed (it has stopped polling)."""
    out, _ = check.communicate(timeout=10)
    assert check.returncode == 0
    return out


def last_module_end(installer: Installer) -> dt.datetime:
    ends = [dt.datetime.fromisoformat(m["end"]) for m in timeline.load(installer.results)["modules"]]
    return max(e if e.tzinfo else e.replace(tzinfo=dt.UTC) for e in ends)


def written_at(path: Path) -> dt.datetime:
    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)


@pytest.fixture
def etcd_client_certs(sim_cluster: SimCluster, tmp_path: Path) -> Iterator[None]:
    """What KubeKey's Setup creates before it applies the cc: Secret kube-etcd-client-certs from the etcd node's
    certificate files (here files of the same names with test content)."""
    files = []
    for key in ("etcd-client-ca.crt", "etcd-client.crt", "etcd-client.key"):
        (tmp_path / key).write_text(f"test {key}\n")
        files.append(f"--from-file={key}={tmp_path / key}")
    sim_cluster.kubectl("create", "namespace", "kubesphere-monitoring-system", check=False)
    # An earlier test's platform may have left the installer's own (monitoring keeps credentials it made).
    sim_cluster.kubectl("-n", "kubesphere-monitoring-system", "delete", "secret", ETCD_SECRET, "--ignore-not-found")
    sim_cluster.kubectl("-n", "kubesphere-monitoring-system", "create", "secret", "generic", ETCD_SECRET, *files)
    yield
    sim_cluster.kubectl("-n", "kubesphere-monitoring-system", "delete", "secret", ETCD_SECRET, "--ignore-not-found")


@pytest.mark.usefixtures("etcd_client_certs")
def test_kubekey_v300_cc_installs_and_its_check_prints_the_box_after_the_run(
        installer: Installer, sim_cluster: SimCluster) -> None:
    """The oldest cc KubeKey writes (KubeSphere v3.0.0), applied as KubeKey applies it, on a cluster without the
    installer's state: a first install of the default modules (and metrics_server, which that template switches
    on) reaching Ready, its legacy keys named in status.migrations; KubeKey's check ends with the welcome box,
    written after the last module ended."""
    assert not running_file(installer).exists()
    with kubekey_check(installer) as check:
        sim_cluster.kubectl("apply", "-f", str(KUBEKEY / "cc_v3.0.0.yaml"))
        proc = installer.reconcile()
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert installer.ran(proc) == ["ks-config", "ks-core", "metrics_server", "monitoring", "preinstall"]
        box = printed(check)
    assert BOX in box and "Account: admin" in box
    assert box == running_file(installer).read_text()
    assert written_at(running_file(installer)) >= last_module_end(installer).replace(microsecond=0)
    status = installer.status()
    assert installer.condition("Ready")["status"] == "True", status.get("conditions")
    assert {"moved console -> common.core.console", "moved networkpolicy -> network.networkpolicy",
            "kept legacy devops.jenkinsJavaOpts_Xms (no longer read)"} <= set(status["migrations"])
    assert status["metricsServer"]["status"] == "enabled" and status["core"]["version"] == "v3.4.1"
    # KubeKey applies its cc again with the optional keys spelled as unset ("" or null): nothing changed.
    spec = yaml.safe_load((KUBEKEY / "cc_v3.0.0.yaml").read_text())["spec"]
    installer.put_spec({**spec, "namespace_override": "", "zone": None})
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert installer.ran(proc) == [], proc.stderr[-4000:]
    assert installer.condition("Ready")["status"] == "True"


def _watch(path: Path, stop: threading.Event, seen: list[str]) -> None:
    """What a reader of ``path`` finds while the run goes on: ``absent``, ``empty`` or the text."""
    while not stop.wait(0.02):
        try:
            seen.append(path.read_text() or "empty")
        except FileNotFoundError:
            seen.append("absent")


@pytest.mark.platform
def test_a_later_edit_keeps_the_file_readable_and_rewrites_it_at_the_end(installer: Installer) -> None:
    path = running_file(installer)
    before = path.read_text()  # the platform's own reconcile wrote it
    seen: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(path, stop, seen))
    with kubekey_check(installer) as check:
        watcher.start()
        installer.apply_cc(common__core__console__enableMultiLogin=False)
        try:
            proc = installer.reconcile()
        finally:
            stop.set()
            watcher.join()
        assert printed(check) == before  # at once: the earlier run's box, as with upstream's pod
    assert installer.ran(proc) == ["ks-config"]
    assert seen and set(seen) <= {before, path.read_text()}, {s[:20] for s in seen}
    assert written_at(path) >= last_module_end(installer).replace(microsecond=0)
    assert BOX in path.read_text()


def scheduled_run(installer: Installer, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The hook as shell-operator runs it for a tick of its schedule binding (the cc as its snapshot)."""
    context = [{"binding": SCHEDULE_BINDING, "type": "Schedule",
                "snapshots": {SPEC_BINDING: [{"object": installer.cc()}]}}]
    (tmp_path / "context.json").write_text(json.dumps(context))
    return subprocess.run([sys.executable, str(HOOK)], capture_output=True, text=True, timeout=600,
                          env=installer.environ(BINDING_CONTEXT_PATH=str(tmp_path / "context.json"),
                                                KUBERNETES_PATCH_PATH=str(tmp_path / "patch.jsonl")))


@pytest.mark.platform
def test_a_failed_pluggable_module_still_ends_with_the_file(installer: Installer, tmp_path: Path) -> None:
    """A new pod (no file) whose run upgrades monitoring, which fails after a while: upstream runs monitoring
    beside the other pluggable modules and renders the file after them whatever their result; the box is logged
    only by the run that ends with every module installed: here the schedule's retry of monitoring."""
    running_file(installer).unlink()
    hold: list[dict[str, Any]] = [{"name": "Monitoring | Hold", "ansible.builtin.wait_for": {"timeout": 3}},
                                  {"name": "Monitoring | Break", "ansible.builtin.fail": {"msg": "broken on purpose"}}]
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path, "monitoring", pre_tasks=hold))
    with kubekey_check(installer) as check:
        proc = installer.reconcile()
        assert installer.ran(proc) == ["monitoring"], proc.stderr[-3000:]
        box = printed(check)
    assert BOX in box
    assert written_at(running_file(installer)) >= last_module_end(installer).replace(microsecond=0)
    assert installer.condition("Ready")["reason"] == "ModulesFailed"
    assert "Not showing the welcome box: monitoring not installed" in proc.stderr and BOX not in proc.stderr

    # The schedule's tick once the backoff has expired: monitoring runs again and succeeds; that run shows the box.
    del installer.env["KS_PLAYBOOKS_DIR"]
    installer.patch_status({"modules": {"monitoring": {"nextRetryTime": "2000-01-01T00:00:00Z"}}})
    retry = scheduled_run(installer, tmp_path)
    assert retry.returncode == 0, retry.stderr[-3000:]
    assert "Retrying modules whose backoff expired: monitoring" in retry.stderr
    assert installer.ran(retry) == ["monitoring"], retry.stderr[-3000:]
    assert BOX in retry.stderr and retry.stderr.index(BOX) < retry.stderr.index("Reconcile finished, Ready")
    assert BOX in running_file(installer).read_text()
    # The next tick: nothing due, nothing run, no box.
    tick = scheduled_run(installer, tmp_path)
    assert tick.returncode == 0 and BOX not in tick.stderr and not installer.ran(tick), tick.stderr[-3000:]


@pytest.mark.platform
def test_a_failed_core_module_leaves_the_file_as_it_was(installer: Installer, tmp_path: Path) -> None:
    """ks-config fails: upstream exits before result-info.yaml, so the file of an earlier run in the same pod stays
    as it was, and a new pod has none (KubeKey keeps waiting)."""
    path = running_file(installer)
    before, mtime = path.read_text(), path.stat().st_mtime_ns
    broken = [{"name": "Config | Break", "ansible.builtin.fail": {"msg": "broken on purpose"}}]
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path, "ks-config", pre_tasks=broken))
    proc = installer.reconcile()
    assert installer.ran(proc) == ["ks-config"] and "task ks-config status is failed" in proc.stderr
    assert (path.read_text(), path.stat().st_mtime_ns) == (before, mtime)
    path.unlink()
    with kubekey_check(installer) as check:
        proc = installer.reconcile()
        assert installer.ran(proc) == ["ks-config"]
        assert check.poll() is None and not path.exists()
