"""The engine against the real apiserver: runs only what changed, uninstalls what was disabled."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from installer.json_bounded import MAX_DEPTH

from .conftest import REPO, Installer, kill_tree, playbooks_changed, stored_state

pytestmark = pytest.mark.cluster
DEFAULT_MODULES = ["ks-config", "ks-core", "monitoring", "preinstall"]
WITH_OBJECTS = ["ks-config", "ks-core", "monitoring", "preinstall"]


def _command(installer: Installer, module: str) -> list[str]:
    """The command line of the module's last run (ansible-runner's record of it)."""
    return json.loads((installer.results / module / "command").read_text())["command"]


@pytest.mark.versions
def test_first_reconcile_installs_default_modules_and_reports_ready(installer: Installer, tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.json"
    installer.env["METRICS_PATH"] = str(metrics)
    installer.apply_cc()
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert installer.ran(proc) == DEFAULT_MODULES
    assert set(WITH_OBJECTS) <= set(installer.module_objects())  # (other tests leave other modules' objects)
    for module in DEFAULT_MODULES:
        assert f"Start installing {module}" in proc.stderr
        stdout = installer.results / module / "stdout"
        assert "PLAY RECAP" in stdout.read_text(), f"{module} has no Ansible output"
        # Every module runs playbooks/install.yaml, with its name and role as variables.
        assert str(REPO / "playbooks" / "install.yaml") in _command(installer, module)
        assert f"PLAY [Install {module}]" in stdout.read_text()
    assert "TASK [ks-monitor : " in (installer.results / "monitoring" / "stdout").read_text()  # its role's tasks
    assert "Waiting for all tasks to be completed ..." in proc.stderr
    assert "task ks-core status is successful  (" in proc.stderr
    status = installer.status()
    assert status["core"]["status"] == "enabled" and status["core"]["version"] == "v3.4.1"
    assert status["monitoring"]["status"] == "enabled" and status["monitoring"]["enabledTime"]
    assert {m: status["modules"][m]["phase"] for m in DEFAULT_MODULES} == dict.fromkeys(DEFAULT_MODULES, "Installed")
    ready = installer.condition("Ready")
    assert ready["status"] == "True" and ready["observedGeneration"] == installer.cc()["metadata"]["generation"]
    assert status["modulesReady"] == "4/4"
    assert installer.condition("Stalled")["status"] == "False"
    assert sorted(stored_state(installer)) == ["_format", "_spec", "_writer", *DEFAULT_MODULES]
    mirror = (installer.results / "last-applied-configs.yaml").read_text()
    assert "ks-core" in mirror
    # kubectl describe cc tells the story; shell-operator gets the run metrics.
    events = installer.cc_events()
    for module in DEFAULT_MODULES:
        assert ("Normal", "ModuleInstalling", f"Start installing {module}") in events
        assert any(e[:2] == ("Normal", "ModuleInstalled") and e[2].startswith(f"{module} installed in ")
                   for e in events), events
    ops = [json.loads(line) for line in metrics.read_text().splitlines()]
    runs = {op["labels"]["module"] for op in ops if op["name"] == "ks_installer_module_run_seconds"}
    assert runs == set(DEFAULT_MODULES)
    phases = {op["labels"]["phase"]: op["value"] for op in ops if op["name"] == "ks_installer_modules"}
    assert phases["Installed"] == 4 and phases["Failed"] == 0
    # python -m installer status / watch read the same story.
    shown = installer.cli("status")
    assert shown.returncode == 0 and "Ready: True" in shown.stdout, shown.stderr
    assert all(re.search(rf"^{m}\s+Installed\b", shown.stdout, re.M) for m in DEFAULT_MODULES), shown.stdout
    assert installer.cli("watch", "--timeout", "30").returncode == 0
    # The run's timeline: each module with its tasks, in time order.
    timeline = json.loads((installer.results / "timeline.json").read_text())
    assert sorted(m["module"] for m in timeline["modules"]) == DEFAULT_MODULES
    at = datetime.fromisoformat
    for module in timeline["modules"]:
        assert module["outcome"] == "successful" and at(module["start"]) <= at(module["end"])
        assert module["tasks"] and all(t["outcome"] in ("ok", "changed", "skipped") for t in module["tasks"])
        assert all(at(module["start"]) <= at(t["start"]) <= at(t["end"]) <= at(module["end"])
                   for t in module["tasks"]), module


@pytest.mark.platform
def test_unchanged_spec_runs_no_playbook(installer: Installer) -> None:
    installer.apply_cc()
    installer.reconcile()
    before = installer.module_objects()
    proc = installer.reconcile()
    assert proc.returncode == 0
    assert installer.ran(proc) == []
    assert "Start " not in proc.stderr and "Plan: nothing to do" in proc.stderr
    assert installer.module_objects() == before
    assert not list(installer.results.glob("*/stdout"))  # no playbook wrote its results


@pytest.mark.platform
def test_etcd_monitoring_reruns_only_monitoring(installer: Installer) -> None:
    installer.apply_cc()
    installer.reconcile()
    before = installer.module_objects()
    installer.apply_cc(etcd__monitoring=True, etcd__tlsEnable=False, etcd__endpointIps="172.31.0.2")
    # While it runs, the status publishes the module's current task (what python -m installer watch shows): two
    # pauses longer than the publishing interval, so that a fast run still shows tasks one after the other.
    hold = [{"name": f"Monitoring | Hold {when}", "ansible.builtin.wait_for": {"timeout": 3}} for when in ("in", "out")]
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(installer.results.parent, "monitoring",
                                                              pre_tasks=hold[:1], post_tasks=hold[1:]))
    log = (installer.results.parent / "reconcile.log").open("w+")
    running = subprocess.Popen([sys.executable, "-m", "installer", "reconcile"], env=installer.environ(),
                               stdout=subprocess.DEVNULL, stderr=log, text=True)
    seen: set[tuple[int, str]] = set()
    while running.poll() is None:
        module = (installer.status().get("modules") or {}).get("monitoring") or {}
        if module.get("phase") == "Upgrading" and module.get("currentTask"):
            seen.add((module["task"], module["currentTask"]))
        time.sleep(0.3)
    log.seek(0)
    proc = subprocess.CompletedProcess(running.args, running.returncode, "", log.read())
    log.close()
    # Its tasks, and those of the shared task files it includes (Helm | ...), one after the other.
    assert len(seen) >= 2 and any(name.startswith("Monitoring") for _, name in seen), (seen, proc.stderr[-3000:])
    module = installer.status()["modules"]["monitoring"]
    assert "currentTask" not in module and module["tasks"] >= max(i for i, _ in seen)
    assert installer.ran(proc) == ["monitoring"]
    assert "[monitoring] etcd.monitoring: false -> true" in proc.stderr
    after = installer.module_objects()
    added = set(after["monitoring"]) - set(before["monitoring"])
    assert {"Service/kube-system/etcd", "ServiceMonitor/kubesphere-monitoring-system/etcd"} <= added, added
    assert {m: after[m] for m in after if m != "monitoring"} == {m: before[m] for m in before if m != "monitoring"}


@pytest.mark.platform
def test_disable_uninstalls_and_enable_reinstalls(installer: Installer) -> None:
    installer.apply_cc(gatekeeper={"enabled": True})
    installer.reconcile()
    assert "gatekeeper" in installer.module_objects()
    assert installer.status()["gatekeeper"]["status"] == "enabled"
    others = {m: v for m, v in installer.module_objects().items() if m != "gatekeeper"}

    installer.apply_cc(gatekeeper={"enabled": False})
    proc = installer.reconcile()
    assert installer.ran(proc) == ["gatekeeper"]
    assert "Start uninstalling gatekeeper" in proc.stderr
    assert str(REPO / "playbooks" / "uninstall.yaml") in _command(installer, "gatekeeper")
    assert "PLAY [Uninstall gatekeeper]" in (installer.results / "gatekeeper" / "stdout").read_text()
    assert installer.leftovers("gatekeeper") == set()  # its CRDs stay, by policy
    assert {m: v for m, v in installer.module_objects().items() if m != "gatekeeper"} == others
    status = installer.status()
    assert "gatekeeper" not in status and status["modules"]["gatekeeper"]["phase"] == "Uninstalled"
    assert "gatekeeper" not in stored_state(installer)

    installer.apply_cc(gatekeeper={"enabled": True})
    proc = installer.reconcile()
    assert installer.ran(proc) == ["gatekeeper"]
    assert "gatekeeper" in installer.module_objects()
    assert installer.status()["gatekeeper"]["status"] == "enabled"


@pytest.mark.platform
def test_derived_opensearch_is_uninstalled_with_its_last_consumer(installer: Installer) -> None:
    installer.apply_cc(logging={"enabled": True, "logsidecar": {"enabled": True, "replicas": 2}})
    proc = installer.reconcile()
    assert {"fluentbit", "logging", "opensearch"} <= set(installer.ran(proc))
    installer.apply_cc()
    proc = installer.reconcile()
    assert installer.ran(proc) == ["fluentbit", "ks-config", "logging", "opensearch"]
    stderr = proc.stderr
    assert stderr.index("Start uninstalling logging") < stderr.index("task logging status")
    assert stderr.index("task logging status") < stderr.index("Start uninstalling opensearch")
    assert not installer.leftovers("fluentbit", "logging", "opensearch")


@pytest.mark.platform
def test_failed_module_blocks_dependents_and_is_retried(installer: Installer, tmp_path: Path) -> None:
    playbooks = tmp_path / "failing-playbooks"
    playbooks.mkdir()
    (playbooks / "opensearch.yaml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: OpenSearch | Install the cluster\n"
        "      ansible.builtin.fail:\n        msg: opensearch-master did not become ready\n")
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks)
    installer.apply_cc(logging={"enabled": True, "logsidecar": {"enabled": True, "replicas": 2}})
    proc = installer.reconcile()
    # reported in status, not a crash (the CLI exits 1 when a module failed; the hook exits 0)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    modules = installer.status()["modules"]
    assert modules["opensearch"]["phase"] == "Failed"
    assert modules["opensearch"]["failedTask"] == "OpenSearch | Install the cluster"
    assert "opensearch-master did not become ready" in modules["opensearch"]["message"]
    assert modules["opensearch"]["attempts"] == 1 and modules["opensearch"]["nextRetryTime"]
    assert modules["logging"]["phase"] == "Blocked" and "opensearch" in modules["logging"]["message"]
    assert modules["fluentbit"]["phase"] == "Installed"  # independent of the failure
    assert "Task 'opensearch' failed" in proc.stderr
    assert any(e[:2] == ("Warning", "ModuleFailed") and e[2].startswith(
        "opensearch failed at task 'OpenSearch | Install the cluster': ") and "did not become ready" in e[2]
        for e in installer.cc_events()), installer.cc_events()
    ready = installer.condition("Ready")
    assert ready["status"] == "False" and "opensearch" in ready["message"]
    assert installer.status()["modulesReady"] == "5/7"  # opensearch failed, logging blocked

    (playbooks / "opensearch.yaml").unlink()  # playbooks/install.yaml again
    proc = installer.reconcile()
    assert installer.ran(proc) == ["logging", "opensearch"]
    assert installer.condition("Ready")["status"] == "True"
    assert installer.status()["modules"]["opensearch"]["phase"] == "Installed"
    assert "attempts" not in installer.status()["modules"]["opensearch"]


BAD_SPECS = [
    ({"etcd__monitoring": "yes"}, "etcd.monitoring"),
    ({"multicluster__clusterRole": "hub"}, "multicluster.clusterRole"),
    ({"persistence__storageClass": "; rm -rf /"}, "persistence.storageClass"),
    ({"local_registry": "{{ lookup('pipe','id') }}"}, "local_registry"),
]


@pytest.mark.platform
def test_bad_spec_is_stalled_and_changes_nothing(installer: Installer) -> None:
    """Each bad spec in turn, on one installed platform (nothing any of them does may change it)."""
    installer.apply_cc()
    installer.reconcile()
    objects, state = installer.module_objects(), stored_state(installer)
    for spec_change, field in BAD_SPECS:
        installer.apply_cc(**spec_change)
        proc = installer.reconcile()
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, field
        assert installer.ran(proc) == [], field
        stalled = installer.condition("Stalled")
        assert stalled["status"] == "True" and stalled["reason"] == "InvalidSpec" and field in stalled["message"]
        assert stalled["observedGeneration"] == installer.cc()["metadata"]["generation"], field
        assert installer.condition("Ready")["status"] == "False", field
        assert field in proc.stderr
        assert installer.module_objects() == objects and stored_state(installer) == state, field


def _put_raw(installer: Installer, cc: dict, spec_text: str) -> None:
    """PUT the cc with ``spec_text`` as its spec, as text: the client would recurse into a deep spec."""
    from installer.settings import CC_GROUP, CC_NAME, CC_PLURAL, CC_VERSION, NAMESPACE

    api = installer.api
    body = {**cc, "spec": "SPEC"}  # with the resourceVersion read: a custom resource has no unconditional update
    headers = {"Content-Type": "application/json"}
    api.update_params_for_auth(headers, [], ["BearerToken"])
    response = api.rest_client.pool_manager.request(
        "PUT", f"{api.configuration.host}/apis/{CC_GROUP}/{CC_VERSION}/namespaces/{NAMESPACE}/{CC_PLURAL}/{CC_NAME}",
        body=json.dumps(body).replace('"SPEC"', spec_text).encode(), headers=headers)
    assert response.status == 200, response.data[:2000]


DEEP = 995  # the API server accepts it; Python's JSON decoder does not


@pytest.mark.platform
def test_a_spec_nested_deeper_than_python_parses_is_stalled_and_changes_nothing(installer: Installer) -> None:
    """A cc nested 995 deep, which the API server accepts, is refused like any invalid spec. The client would
    recurse encoding such a spec, so it is written here as text."""
    from installer.objects.cluster import ClusterConfigurations

    installer.apply_cc()
    installer.reconcile()
    objects, state = installer.module_objects(), stored_state(installer)
    ccs = ClusterConfigurations(installer.api)
    live = ccs.get()
    assert live is not None
    deep = json.dumps(live["spec"])[:-1] + ', "affinity": ' + "[" * DEEP + "]" * DEEP + "}"
    _put_raw(installer, live, deep)
    try:
        proc = installer.reconcile(check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert f"is nested deeper than {MAX_DEPTH} levels" in proc.stderr and installer.ran(proc) == []
        cc = ccs.get()
        assert cc is not None
        stalled = next(c for c in cc["status"]["conditions"] if c["type"] == "Stalled")
        assert stalled["status"] == "True" and stalled["reason"] == "InvalidSpec"
        assert "affinity[0][0]" in stalled["message"]
        assert stalled["observedGeneration"] == cc["metadata"]["generation"]
        assert installer.module_objects() == objects and stored_state(installer) == state
    finally:  # back to a spec the next test's harness can read, whatever failed
        _put_raw(installer, ccs.get() or live, json.dumps(live["spec"]))
    assert any(e[1] == "InvalidSpec" and "nested deeper" in e[2] for e in installer.cc_events())


@pytest.mark.platform
def test_sigkill_mid_run_then_rerun_completes(installer: Installer) -> None:
    installer.apply_cc()
    installer.reconcile()
    installer.apply_cc(logging={"enabled": True, "logsidecar": {"enabled": True, "replicas": 2}},
                       gatekeeper={"enabled": True})
    proc = subprocess.Popen([sys.executable, "-m", "installer", "reconcile"], env=installer.environ(),
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    for line in proc.stderr:
        if line.startswith("task ") or time.monotonic() > deadline:
            break  # at least one module finished and others are running
    kill_tree(proc.pid)
    proc.wait()
    state = stored_state(installer)  # the store is readable: every entry whole
    assert all("hash" in v for k, v in state.items() if not k.startswith("_"))
    completed = {k for k, v in state.items() if not k.startswith("_") and v["hash"] and not v.get("intent")}
    unfinished = {k for k, v in state.items() if not k.startswith("_") and v.get("intent")}
    assert unfinished, "the kill left no module mid-run"
    rerun = installer.reconcile()
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Start uninstalling" not in rerun.stderr
    assert "Taking over the lease" in rerun.stderr  # the killed run's lease does not hold the next one up
    assert installer.condition("Ready")["status"] == "True"
    assert {"fluentbit", "gatekeeper", "logging", "opensearch", *WITH_OBJECTS} <= set(installer.module_objects())
    assert unfinished <= set(installer.ran(rerun))  # possibly half-applied: re-run
    assert set(installer.ran(rerun)).isdisjoint(completed - {"ks-config"})


@pytest.mark.platform
def test_forced_full_run_reruns_every_enabled_module(installer: Installer) -> None:
    installer.apply_cc()
    installer.reconcile()
    proc = installer.reconcile("--all")
    assert installer.ran(proc) == DEFAULT_MODULES
