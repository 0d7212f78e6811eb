"""The user's path under the real shell-operator: apply the installer manifest and the default cc, edit the cc.

shell-operator runs this repo's hooks dir with a token of the installer's ServiceAccount (so the manifest's RBAC
is what the hook gets, as in the pod). The tests in this file share one installation and run in order, like a
user's session: install, no-op apply, edits, restart, bad input.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cluster_objects import eventually, labelled_objects
from installer_state import forget_installer
from kubernetes import client
from shelloperator import ShellOperator
from simcluster import SimCluster

from installer.settings import CC_GROUP, CC_NAME, CC_PLURAL, CC_VERSION, NAMESPACE, STATE_SECRET

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
DEFAULT_MODULES = {"preinstall", "ks-core", "ks-config", "monitoring"}
CORE_DEPLOYMENTS = ("ks-apiserver", "ks-console", "ks-controller-manager")
RECONCILE_TIMEOUT = 420
WELCOME = "###              Welcome to KubeSphere!           ###"


@dataclass
class Session:
    cluster: SimCluster
    api: client.ApiClient
    root: Path
    operator: ShellOperator = field(init=False)

    @property
    def base(self) -> Path:
        return self.root / "kubesphere"

    def start_operator(self) -> None:
        kubeconfig = self.cluster.service_account_kubeconfig(NAMESPACE, "ks-installer", self.root / "sa.kubeconfig")
        self.operator = ShellOperator(kubeconfig, REPO / "hooks", work_dir=self.root / "so",
                                      env={"KS_BASE_DIR": str(self.base), "KS_CONSOLE_TIMEOUT": "300"},
                                      path_prepend=[self.cluster.bin_dir])
        self.since_start = self.operator.mark()  # a restarted operator appends to the log of the one before
        self.operator.start()
        self.operator.wait_for_log(r"Kubernetes bindings for hook are enabled successfully", timeout=60,
                                   since=self.since_start)

    def hook_entries(self, since: int = 0) -> list[dict[str, Any]]:
        """The hook's entries in shell-operator's log (one JSON object per line; hook output is its ``msg``)."""
        out = []
        for raw in self.operator.log_text()[since:].splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("output") in ("stdout", "stderr"):
                out.append(entry)
        return out

    def hook_lines(self, since: int = 0) -> list[str]:
        return [str(entry.get("msg", "")) for entry in self.hook_entries(since)]

    def wait_reconciled(self, since: int) -> list[str]:
        """Wait for the end of a reconcile logged after ``since``; the hook's lines of it."""
        self.operator.wait_for_log(r"Reconcile finished|spec is invalid; nothing was changed", since=since,
                                   timeout=RECONCILE_TIMEOUT)
        # shell-operator may coalesce queued events, so the first run to finish after ``since`` can be one that
        # read the previous spec: wait until a finished run has observed the current generation.
        self.wait_observed()
        time.sleep(1)  # the hook's last lines and exit
        return self.hook_lines(since)

    def kubectl(self, *args: str) -> str:
        return self.cluster.kubectl(*args, timeout=RECONCILE_TIMEOUT + 30).stdout

    def wait_idle(self, timeout: float = RECONCILE_TIMEOUT) -> None:
        """Wait until no hook run is under way or queued (e.g. the cc's Added event after the synchronization run
        that installed it), so that the next run is the one a change triggers."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.operator.log_text()[self.since_start:]  # a killed operator's last run never ends
            started = log.count('"msg":"Execute hook"')
            queued = [m.start() for m in re.finditer(r'"msg":"queue task".*"name":"HookRun', log)]
            if started == log.count('"msg":"Hook executed successfully"') + log.count('"msg":"Hook failed') and \
                    (not queued or queued[-1] < log.rfind('"msg":"Execute hook"')):
                return
            assert time.monotonic() < deadline, "shell-operator's queue did not drain"
            time.sleep(0.5)

    def patch_spec(self, spec: dict[str, Any]) -> int:
        self.wait_idle()
        mark = self.operator.mark()
        self.kubectl("patch", "cc", CC_NAME, "-n", NAMESPACE, "--type=merge", "-p", json.dumps({"spec": spec}))
        return mark

    def wait_observed(self, timeout: float = RECONCILE_TIMEOUT) -> dict[str, Any]:
        """Wait until a finished reconcile has observed the cc's current generation; its status."""
        deadline = time.monotonic() + timeout
        while True:
            cc = self.cc()
            status = cc.get("status") or {}
            reconciling = next((c for c in status.get("conditions", []) if c["type"] == "Reconciling"), {})
            if status.get("observedGeneration") == cc["metadata"]["generation"] and \
                    reconciling.get("status") == "False":
                return status
            assert time.monotonic() < deadline, f"generation {cc['metadata']['generation']} not observed: {status}"
            time.sleep(1)

    def cc(self) -> dict[str, Any]:
        return client.CustomObjectsApi(self.api).get_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE,
                                                                              CC_PLURAL, CC_NAME)

    def condition(self, type_: str) -> dict[str, Any]:
        return next(c for c in self.cc()["status"]["conditions"] if c["type"] == type_)


def started(lines: list[str]) -> set[str]:
    return {m.group(2) for line in lines if (m := re.match(r"Start (installing|upgrading|uninstalling) (\S+)$", line))}


def resource_versions(api: client.ApiClient) -> dict[str, str]:
    """resourceVersion of every object the installer applied, by kind/namespace/name."""
    return {key: rv for objects in labelled_objects(api).values() for key, rv in objects.items()}


@contextlib.contextmanager
def operator_session(sim_cluster: SimCluster, kube_api: client.ApiClient, work: Path) -> Iterator[Session]:
    """The installer manifest applied (no cc yet) and shell-operator running under its ServiceAccount; afterwards
    the operator stopped and the installer forgotten."""
    forget_installer(kube_api)
    sim_cluster.kubectl("apply", "-f", str(REPO / "deploy" / "kubesphere-installer.yaml"))
    sim_cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
    s = Session(sim_cluster, kube_api, work)
    s.start_operator()
    try:
        yield s
    finally:
        s.operator.stop()
        forget_installer(kube_api)


@pytest.fixture(scope="module")
def session(sim_cluster: SimCluster, kube_api: client.ApiClient,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with operator_session(sim_cluster, kube_api, tmp_path_factory.mktemp("e2e")) as s:
        yield s


def box_before(lines: list[str], end: str) -> list[str]:
    """The welcome box the hook logged last before the line ``end`` ([] when none came since the one before)."""
    last = max(i for i, line in enumerate(lines) if line.startswith(end))
    titles = [i for i, line in enumerate(lines[:last]) if line == WELCOME]
    if not titles or any(line.startswith(end) for line in lines[titles[-1]:last]):
        return []
    start = titles[-1] - 1
    stop = next(i for i in range(start + 3, last) if lines[i] == lines[start]) + 3  # RULE, the time, RULE
    return lines[start:stop]


def test_fresh_install_reaches_ready_and_welcomes(session: Session) -> None:
    mark = session.operator.mark()
    # The files shell-operator writes for the hook (binding contexts: the cc and the state snapshot) exist while a
    # hook runs: copies of them, every 50 ms, until the install is done.
    written: dict[str, bytes] = {}
    done = threading.Event()

    def collect() -> None:
        while not done.is_set():
            for f in session.operator.tmp_dir.rglob("*"):
                with contextlib.suppress(OSError):
                    if f.is_file():
                        written[f.name] = f.read_bytes()
            done.wait(0.05)

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    session.kubectl("apply", "-f", str(REPO / "deploy" / "cluster-configuration.yaml"))
    wait = session.cluster.kubectl("wait", "--for=condition=Ready", f"--timeout={RECONCILE_TIMEOUT}s", "-n",
                                   NAMESPACE, "cc/ks-installer", timeout=RECONCILE_TIMEOUT + 30)
    assert "condition met" in wait.stdout
    lines = session.wait_reconciled(mark)
    done.set()
    collector.join()
    assert started(lines) == DEFAULT_MODULES, lines
    assert "Waiting for all tasks to be completed ..." in lines, lines
    assert any(re.fullmatch(r"task ks-core status is successful  \(\d/4\)", line) for line in lines), lines
    # the welcome box, in the pod log and in the file KubeKey reads
    assert WELCOME in lines, lines
    running = (session.base / "playbooks" / "kubesphere_running").read_text()
    assert "Welcome to KubeSphere!" in running and "Account: admin" in running, running
    console = next(line for line in running.splitlines() if line.startswith("Console: "))
    assert re.fullmatch(r"Console: http://172\.31\.\d+\.\d:30880", console), running  # a node IP of this cluster
    apps = client.AppsV1Api(session.api)
    for name in CORE_DEPLOYMENTS:
        conds = apps.read_namespaced_deployment(name, NAMESPACE).status.conditions
        assert any(c.type == "Available" and c.status == "True" for c in conds), (name, conds)
    status = session.cc()["status"]
    assert status["core"]["status"] == "enabled" and status["core"]["version"] == "v3.4.1", status
    assert status["monitoring"]["status"] == "enabled", status
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\w+", status["monitoring"]["enabledTime"])
    # each module's Ansible output in its results dir
    for module in DEFAULT_MODULES:
        stdout = (session.base / "results" / module / "stdout").read_text()
        assert "PLAY RECAP" in stdout, (module, stdout[-2000:])
    # secrets never reach the log
    secret = client.CoreV1Api(session.api).read_namespaced_secret("kubesphere-secret", NAMESPACE)
    jwt = secret.data["secret"]
    assert base64.b64decode(jwt).decode() not in session.operator.log_text()
    # ... nor the files shell-operator wrote for the hook
    assert any("binding-context" in name for name in written), sorted(written)
    assert not [name for name, data in written.items() if base64.b64decode(jwt) in data or jwt.encode() in data]
    printed = session.kubectl("get", "cc", "-n", NAMESPACE)
    assert re.search(r"ks-installer\s+True\s+False\s+4/4\s+Installed\s+v3\.4\.1", printed), printed
    # The story in kubectl describe (Events written with the installer's own RBAC) ...
    described = session.kubectl("describe", "cc", "ks-installer", "-n", NAMESPACE)
    for module in DEFAULT_MODULES:
        assert re.search(rf"Normal\s+ModuleInstalled\s+.*{re.escape(module)} installed in \d+s", described), described
    # ... and the run in the hooks' metrics shell-operator serves (it reads them once the hook has exited).
    def hook_metrics() -> str | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{session.operator.port}/metrics/hooks", timeout=10) as answer:
            text = answer.read().decode()
        return text if "ks_installer_module_run_seconds_count" in text else None

    metrics = eventually(hook_metrics, 30, "the hook's metrics")
    for module in DEFAULT_MODULES:
        assert re.search(rf'ks_installer_module_run_seconds_count{{[^}}]*module="{re.escape(module)}"[^}}]*}} 1',
                         metrics), (module, metrics[-3000:])
    assert re.search(r'ks_installer_modules{[^}]*phase="Installed"[^}]*} 4', metrics), metrics[-3000:]


def test_edit_that_changes_no_input_runs_nothing(session: Session) -> None:
    # No run queued (the cc's Added event after the install), and the last state write in shell-operator's snapshot:
    # a snapshot behind the state sends the event to the full path.
    session.wait_idle()
    state_settled(session)
    before = resource_versions(session.api)
    generation = session.cc()["metadata"]["generation"]
    # The spec changes (the hook runs) but its defaulted values do not: 2Gi is the default.
    mark = session.patch_spec({"common": {"redis": {"volumeSize": None}}})
    lines = session.wait_reconciled(mark)
    assert session.cc()["metadata"]["generation"] == generation + 1
    assert "Plan: nothing to do" in lines
    # Decided from the snapshots shell-operator passes (the cc and the state Secret), the status written back
    # through its patch file.
    assert "Settled from shell-operator's snapshots: nothing was read from the API" in lines
    # Its first step, under the installer's ServiceAccount: Ready Unknown at the new generation, then the patch file
    # (applied when it exits) makes it True there.
    assert f"Generation {generation + 1} is not reconciled yet: Ready is Unknown until it is" in lines
    assert not started(lines)
    # As every run of upstream's on an edit: the welcome box, the one this pod wrote last, at the time of now.
    assert box_before(lines, "Reconcile finished, Ready")
    assert resource_versions(session.api) == before
    assert session.wait_observed()["observedGeneration"] == generation + 1


def stored_spec(session: Session) -> dict[str, Any]:
    """The spec the installer's state Secret holds as the last accepted one."""
    secret = client.CoreV1Api(session.api).read_namespaced_secret(STATE_SECRET, NAMESPACE)
    return json.loads(base64.b64decode(secret.data["_spec"]))


def state_settled(session: Session, quiet: float = 3, timeout: float = 60) -> None:
    """Wait until the state Secret has not changed for ``quiet`` seconds: time for shell-operator's snapshot of it
    to catch up with the last write (a snapshot still behind it sends the next event to the full path)."""
    core, deadline = client.CoreV1Api(session.api), time.monotonic() + timeout
    version, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = core.read_namespaced_secret(STATE_SECRET, NAMESPACE).metadata.resource_version
        if now != version:
            version, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.5)


FAST_STORE = "No module reads what changed: the spec is stored, nothing runs"


def test_edit_that_no_module_reads_is_stored_from_the_snapshots(session: Session) -> None:
    before = resource_versions(session.api)
    generation = session.cc()["metadata"]["generation"]
    fast = []
    # Redis is off: its volume size is an input of the redis module only. The spec to store changes, nothing runs:
    # from shell-operator's snapshots, or (when its Secret snapshot lags the last write, as on a loaded machine) by
    # the full path, which also plans nothing.
    for step, size in enumerate(("7Gi", None), start=1):
        state_settled(session)
        mark = session.patch_spec({"common": {"redis": {"volumeSize": size}}})
        lines = session.wait_reconciled(mark)
        assert "Plan: nothing to do" in lines, lines
        if FAST_STORE in lines:
            assert "Settled from shell-operator's snapshots: nothing was read from the API" in lines
            fast.append(step)
        assert not started(lines)
        assert stored_spec(session)["common"]["redis"]["volumeSize"] == (size or "2Gi")
        ready = session.condition("Ready")
        assert (ready["status"], ready["observedGeneration"]) == ("True", generation + step)
    assert resource_versions(session.api) == before
    assert fast, "neither edit was stored from the snapshots"


def annotate_retry(session: Session, value: str) -> list[str]:
    mark = session.operator.mark()
    session.kubectl("annotate", "cc", CC_NAME, "-n", NAMESPACE, "--overwrite", f"installer.kubesphere.io/retry={value}")
    asked = session.operator.wait_for_log(rf"Retry requested \(installer.kubesphere.io/retry={value}\)", since=mark,
                                          timeout=RECONCILE_TIMEOUT)
    lines = session.wait_reconciled(session.operator.log_text().rfind("\n", 0, asked.start()) + 1)
    annotations = session.cc()["metadata"].get("annotations") or {}
    assert "installer.kubesphere.io/retry" not in annotations  # handled once, removed: the command works again
    return lines


@pytest.mark.parametrize("value, expected", [("now", set()), ("all", DEFAULT_MODULES)])
def test_retry_annotation_works_every_time(session: Session, value: str, expected: set[str]) -> None:
    for _ in range(2):
        lines = annotate_retry(session, value)
        assert f"Retry requested (installer.kubesphere.io/retry={value})" in lines
        assert started(lines) == expected
        assert box_before(lines, "Reconcile finished, Ready")
    assert session.condition("Ready")["status"] == "True"


def test_monitoring_setting_reruns_only_monitoring(session: Session) -> None:
    before = resource_versions(session.api)
    mark = session.patch_spec({"monitoring": {"node_exporter": {"port": 9101}}})
    lines = session.wait_reconciled(mark)
    assert started(lines) == {"monitoring"}
    assert "[monitoring] monitoring.node_exporter.port: 9100 -> 9101" in lines
    after = resource_versions(session.api)
    changed = {k for k in after if after[k] != before.get(k)}
    assert "DaemonSet/kubesphere-monitoring-system/node-exporter" in changed
    assert all("kubesphere-monitoring-system" in k for k in changed), changed
    svc = client.CoreV1Api(session.api).read_namespaced_service("node-exporter", "kubesphere-monitoring-system")
    assert [p.port for p in svc.spec.ports] == [9101]


def test_etcd_monitoring_needs_the_secret_then_mounts_it(session: Session) -> None:
    custom = client.CustomObjectsApi(session.api)

    def prometheus() -> dict[str, Any]:
        return custom.get_namespaced_custom_object("monitoring.coreos.com", "v1", "kubesphere-monitoring-system",
                                                   "prometheuses", "k8s")

    assert "kube-etcd-client-certs" not in prometheus()["spec"].get("secrets", [])
    mark = session.patch_spec({"etcd": {"monitoring": True, "endpointIps": "172.31.0.2"}})
    lines = session.wait_reconciled(mark)
    assert started(lines) == {"monitoring"}
    module = session.cc()["status"]["modules"]["monitoring"]
    assert module["phase"] == "Failed"
    assert "kube-etcd-client-certs" in module["message"] and "kubectl -n kubesphere-monitoring-system create secret" \
        in module["message"]
    assert "kube-etcd-client-certs" not in prometheus()["spec"].get("secrets", [])  # Prometheus is not broken

    # The installer retries the failed module with backoff; the retry annotation asks for it now.
    mark = session.operator.mark()
    session.kubectl("create", "secret", "generic", "kube-etcd-client-certs", "-n", "kubesphere-monitoring-system",
                    "--from-literal=etcd-client-ca.crt=ca", "--from-literal=etcd-client.crt=crt",
                    "--from-literal=etcd-client.key=key")
    session.kubectl("annotate", "cc", CC_NAME, "-n", NAMESPACE, "--overwrite",
                    "installer.kubesphere.io/retry=etcd-secret")
    deadline = time.monotonic() + RECONCILE_TIMEOUT
    while session.cc()["status"]["modules"]["monitoring"]["phase"] != "Installed":
        assert time.monotonic() < deadline, session.cc()["status"]["modules"]["monitoring"]
        time.sleep(1)
    assert started(session.hook_lines(mark)) == {"monitoring"}
    assert prometheus()["spec"]["secrets"] == ["kube-etcd-client-certs"]
    assert session.wait_observed()["modules"]["monitoring"]["phase"] == "Installed"
    assert session.condition("Ready")["status"] == "True"


def test_console_port_changes_only_what_depends_on_it(session: Session) -> None:
    mark = session.patch_spec({"common": {"core": {"console": {"port": 30881}}}})
    lines = session.wait_reconciled(mark)
    assert started(lines) == {"ks-core"}
    svc = client.CoreV1Api(session.api).read_namespaced_service("ks-console", NAMESPACE)
    assert [p.node_port for p in svc.spec.ports if p.node_port] == [30881]
    running = (session.base / "playbooks" / "kubesphere_running").read_text()
    assert re.search(r"Console: http://[\d.]+:30881", running)
    box = box_before(lines, "Reconcile finished, Ready")
    # This run's box (the new port), as shell-operator logs lines: trimmed, the empty ones left out.
    assert [ln for ln in box if ln] == [ln.strip() for ln in running.splitlines() if ln.strip()], box


def test_restarting_shell_operator_reruns_nothing(session: Session) -> None:
    before = resource_versions(session.api)
    session.operator.stop()
    mark = session.operator.mark()  # the new operator appends to the same log
    session.start_operator()
    lines = session.wait_reconciled(mark)
    assert "Plan: nothing to do" in lines
    assert not started(lines)
    assert box_before(lines, "Reconcile finished, Ready")  # a new operator's first run ends as upstream's did
    assert resource_versions(session.api) == before
    assert session.condition("Ready")["status"] == "True"


@pytest.mark.parametrize("spec, field, expected", [
    ({"etcd": {"monitoring": "yes"}}, "etcd.monitoring", "boolean"),
    ({"multicluster": {"clusterRole": "hub"}}, "multicluster.clusterRole", "hub"),
    ({"common": {"core": {"console": {"port": "; rm -rf /"}}}}, "common.core.console.port", "integer"),
])
def test_bad_spec_is_stalled_and_changes_nothing(session: Session, spec: dict[str, Any], field: str,
                                                 expected: str) -> None:
    before, previous = resource_versions(session.api), session.cc()["spec"]
    mark = session.patch_spec(spec)
    lines = session.wait_reconciled(mark)
    assert not started(lines)
    assert any(field in line and expected in line for line in lines), lines
    # In the pod log at error level, not info.
    errors = [e["msg"] for e in session.hook_entries(mark) if e.get("level") == "error"]
    assert any("spec is invalid" in msg and field in msg for msg in errors), session.hook_entries(mark)
    stalled = session.condition("Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "InvalidSpec" and field in stalled["message"]
    assert session.condition("Ready")["status"] == "False"
    assert resource_versions(session.api) == before
    restore(session, previous, spec)


def test_missing_storage_class_fails_preinstall_and_changes_nothing(session: Session) -> None:
    before, previous = resource_versions(session.api), session.cc()["spec"]
    spec = {"persistence": {"storageClass": "fast-ssd"}}
    mark = session.patch_spec(spec)
    lines = session.wait_reconciled(mark)
    assert started(lines) == {"preinstall"}
    modules = session.cc()["status"]["modules"]
    assert modules["preinstall"]["phase"] == "Failed"
    assert "StorageClass" in modules["preinstall"]["message"] and "fast-ssd" in modules["preinstall"]["message"]
    assert modules["monitoring"]["phase"] == "Blocked"  # it reads persistence.storageClass: not run
    ready = session.condition("Ready")
    assert ready["status"] == "False" and "preinstall" in ready["message"]
    assert resource_versions(session.api) == before
    restore(session, previous, spec)


def restore(session: Session, previous: dict[str, Any], spec: dict[str, Any]) -> None:
    """Put the previous values of ``spec``'s top-level keys back: Ready again, and nothing re-installed."""
    before = resource_versions(session.api)
    session.patch_spec({k: previous[k] for k in spec})
    status = session.wait_observed()
    assert session.condition("Ready")["status"] == "True", status["conditions"]
    assert session.condition("Stalled")["status"] == "False"
    assert all(m["phase"] in ("Installed", "Uninstalled") for m in status["modules"].values()), status["modules"]
    assert resource_versions(session.api) == before
