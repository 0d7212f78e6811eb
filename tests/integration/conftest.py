"""Fixtures for running the engine against the simulated cluster."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import simcluster
import yaml
from cluster_objects import applied_objects, labelled_objects, sweep_cluster_scoped
from engine_zygote import ENGINE
from installer_state import DEFAULT_CC, REPO, cc_with, forget_installer
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.config import apply_defaults
from installer.engine.plays import module_plays
from installer.engine.reconcile import Reconciler
from installer.engine.state import StateStore
from installer.engine.state_codec import SPEC_KEY
from installer.engine_settings import Settings
from installer.modules import MODULES, get_module
from installer.objects.cluster import ClusterConfigurations
from installer.settings import (
    CC_GROUP,
    CC_NAME,
    CC_PLURAL,
    CC_VERSION,
    LEASE_NAME,
    MODULE_LABEL,
    NAMESPACE,
    STATE_SECRET,
)


@dataclass
class Installer:
    """The engine pointed at the simulated cluster, with its own results dir."""

    api: client.ApiClient
    kubeconfig: str
    results: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def environ(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": self.kubeconfig, "KS_RESULTS_DIR": str(self.results),
                "KS_BASE_DIR": str(self.results.parent), **self.env, **extra}

    def reconcile(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*ENGINE, "reconcile", *args], env=self.environ(),
                              capture_output=True, text=True, timeout=600, check=False)
        if check and proc.returncode not in (0, 1):
            raise AssertionError(f"reconcile crashed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return proc

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``python -m installer <args>`` against the simulated cluster."""
        return subprocess.run([*ENGINE, *args], env=self.environ(), capture_output=True,
                              text=True, timeout=timeout, check=False)

    def reconcile_ok(self) -> list[str]:
        """One successful reconcile; the modules it ran, which must be those ``plan`` said it would run."""
        planned = self.planned()
        proc = self.reconcile()
        assert proc.returncode == 0, proc.stderr[-4000:]
        # Shown with a failed assertion on the modules that ran: the plan and each module's reasons.
        print("\n".join(line for line in proc.stderr.splitlines() if line.startswith(("Plan:", "Start ", "["))))
        ran = self.ran(proc)
        assert ran == planned, f"plan said {planned}, the reconcile ran {ran}"
        return ran

    def planned(self) -> list[str]:
        """The modules ``python -m installer plan`` says the next reconcile runs (its code, in this process)."""
        try:
            cc = self.cc()
        except ApiException:
            return []
        with contextlib.ExitStack() as stack:
            saved = dict(os.environ)
            stack.callback(lambda: (os.environ.clear(), os.environ.update(saved)))
            os.environ.update(self.environ())
            planned = Reconciler(self.api, Settings.from_env()).plan(cc)
        return sorted(s.module for s in planned.plan.runnable) if planned.plan else []

    def apply_cc(self, **spec_changes: Any) -> dict[str, Any]:
        """Create or replace the cc with the default spec plus ``a__b=value`` changes."""
        return self.put_spec(cc_with(**spec_changes)["spec"])

    def put_spec(self, spec: Any) -> dict[str, Any]:
        try:
            live = self.cc()
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = copy.deepcopy(DEFAULT_CC)
            body["spec"] = spec
            return self.custom.create_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE, CC_PLURAL, body)
        live["spec"] = spec
        return self.custom.replace_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE, CC_PLURAL, CC_NAME,
                                                            live)

    def cc(self) -> dict[str, Any]:
        """The cc, read as the installer reads it (a spec nested past the decoder's depth is cut, not fatal)."""
        live = ClusterConfigurations(self.api).get()
        if live is None:
            raise ApiException(status=404, reason=f"{CC_PLURAL} {CC_NAME} not found")
        return live

    def patch_status(self, status: dict[str, Any]) -> None:
        ClusterConfigurations(self.api).patch_status(status)

    def status(self) -> dict[str, Any]:
        return self.cc().get("status") or {}

    def condition(self, type_: str) -> dict[str, Any]:
        return next(c for c in self.status().get("conditions", []) if c["type"] == type_)

    def cc_events(self) -> list[tuple[str, str, str]]:
        """(type, reason, message) of the Events on the current cc, oldest first."""
        uid = self.cc()["metadata"]["uid"]
        events = client.CoreV1Api(self.api).list_namespaced_event(
            NAMESPACE, field_selector=f"involvedObject.uid={uid}").items
        return [(e.type, e.reason, e.message) for e in sorted(events, key=lambda e: e.first_timestamp)]

    def module_objects(self) -> dict[str, dict[str, str]]:
        """The installer's objects by module: ``{module: {"Kind/ns/name": resourceVersion}}``."""
        return labelled_objects(self.api)

    def leftovers(self, *modules: str) -> set[str]:
        """Objects of ``modules``, of any kind the API serves, that an uninstall should have removed: not the CRDs
        and PVCs it keeps, nor a namespace that still holds PVCs."""
        core = client.CoreV1Api(self.api)
        out = set()
        applied = applied_objects(self.api)
        for module in modules:
            for key in applied.get(module, set()):
                kind, _, name = key.split("/", 2)
                if kind in ("CustomResourceDefinition", "PersistentVolumeClaim"):
                    continue
                if kind == "Namespace" and core.list_namespaced_persistent_volume_claim(name.strip("/")).items:
                    continue
                out.add(key)
        return out

    def ran(self, proc: subprocess.CompletedProcess[str]) -> list[str]:
        """Modules whose playbook ran, from the log lines users see."""
        return sorted(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("task ")
                      and " status is " in line)


def between_cleanups(installer: Installer, clean: Callable[[client.ApiClient], None]) -> Iterator[Installer]:
    """For a module test's fixture: ``installer`` (console wait shortened: the console is ks-core's business) with
    ``clean`` (what the test's module leaves behind, or a failed run before it) run before and after."""
    clean(installer.api)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    yield installer
    clean(installer.api)


def playbooks_changed(tmp_path: Path, module: str, **play: Any) -> Path:
    """A directory of plays where ``module``'s install play is its own (playbooks/install.yaml for it) with the keys
    ``play`` (``vars``, ``pre_tasks``, ``post_tasks``...) set: for the engine it replaces the module's play
    (``KS_PLAYBOOKS_DIR``, installer.engine.plays)."""
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir(exist_ok=True)
    plays = module_plays(get_module(module))
    plays[0].update(play)
    (playbooks / f"{module}.yaml").write_text(yaml.safe_dump(plays))
    return playbooks


def stored_state(installer: Installer) -> dict[str, Any]:
    """The decoded entries of the installer's state Secret."""
    data = client.CoreV1Api(installer.api).read_namespaced_secret(STATE_SECRET, NAMESPACE).data or {}
    return {k: json.loads(base64.b64decode(v)) for k, v in data.items()}


def kill_tree(pid: int) -> None:
    """SIGKILL a process and everything under it at once, as a pod kill does (ansible runs in its own pty)."""
    simcluster.kill_tree(simcluster.process_tree(pid))


def _reset(api: client.ApiClient) -> None:
    forget_installer(api)
    client.CoreV1Api(api).delete_collection_namespaced_config_map(NAMESPACE, label_selector=MODULE_LABEL)


@pytest.fixture(scope="session")
def installer_crd(sim_cluster: Any) -> None:
    """The installer manifest's CRD and namespace (the shell-operator Deployment itself is left out)."""
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "kubesphere-installer.yaml").read_text())
            if d and d["kind"] in ("CustomResourceDefinition", "Namespace")]
    manifest = sim_cluster.state_dir / "installer-crd.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    sim_cluster.kubectl("apply", "-f", str(manifest))
    sim_cluster.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")


@pytest.fixture
def installer(request: pytest.FixtureRequest, sim_cluster: Any, kube_api: client.ApiClient, installer_crd: None,
              tmp_path: Path) -> Iterator[Installer]:
    """The engine with no record of anything installed and no cc: the test's first reconcile is a first install.
    A test marked ``platform`` gets :func:`platform` instead: the default platform, installed and recorded."""
    if request.node.get_closest_marker("platform"):
        yield request.getfixturevalue("platform")
        return
    _reset(kube_api)
    yield Installer(kube_api, str(sim_cluster.kubeconfig), tmp_path / "results")
    _reset(kube_api)


#: The modules the default cc installs.
PLATFORM = frozenset(m.name for m in MODULES if m.enabled(apply_defaults(copy.deepcopy(DEFAULT_CC["spec"]))))


def _platform_ready(setup: Installer) -> bool:
    """Converge the cluster back to the default cc with the installer's own reconcile: the platform modules an
    earlier test changed re-run, and a drift check re-applies what it deleted. Other modules an earlier test left
    are forgotten, not uninstalled (as the ``installer`` fixture forgets everything): each module test cleans
    up what its module leaves."""
    with contextlib.suppress(ApiException):
        client.CoordinationV1Api(setup.api).delete_namespaced_lease(LEASE_NAME, NAMESPACE)
    try:
        cc = setup.cc()
        client.CoreV1Api(setup.api).read_namespaced_secret(STATE_SECRET, NAMESPACE)
    except ApiException as exc:
        if exc.status != 404:
            raise
        return False
    store = StateStore(setup.api)
    for key in store.raw():
        if key not in PLATFORM and key != SPEC_KEY:
            store.forget(key)
    annotations = cc["metadata"].get("annotations") or {}
    cc["metadata"]["annotations"] = {k: v for k, v in annotations.items() if not k.startswith(CC_GROUP)}
    cc["spec"] = copy.deepcopy(DEFAULT_CC["spec"])
    setup.custom.replace_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE, CC_PLURAL, CC_NAME, cc)
    if setup.reconcile("--check-drift", check=False).returncode != 0:
        return False
    ready = next((c for c in setup.status().get("conditions", []) if c["type"] == "Ready"), {})
    return ready.get("status") == "True"


@pytest.fixture
def platform(sim_cluster: Any, kube_api: client.ApiClient, installer_crd: None, tmp_path: Path) -> Iterator[Installer]:
    """The engine over the default platform, installed and recorded, as a user has it after applying the default
    cc: the test's first reconcile runs only what the test changes. Each cluster installs the platform once;
    later tests get back to it through the installer's own reconcile (seconds), or a fresh install when that
    fails (an earlier test left the state unreadable or forgot it)."""
    setup = Installer(kube_api, str(sim_cluster.kubeconfig), tmp_path / "platform-setup")
    if not _platform_ready(setup):
        _reset(kube_api)
        # An install without a record prunes nothing cluster-scoped (a label is no proof of whose an object is): what
        # an earlier test's platform left there (etcd's rule group) goes first, as on a fresh cluster.
        sweep_cluster_scoped(kube_api, *sorted(PLATFORM))
        setup.apply_cc()
        setup.reconcile_ok()
    yield Installer(kube_api, str(sim_cluster.kubeconfig), tmp_path / "results")
