"""ks_* tasks in Ansible's worker processes on the simulated cluster: they see the run's environment, and a
cancelled run (the installer stopping) leaves none of its processes working."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from processes import processes_naming

from installer.engine.plan import Action, Step
from installer.engine.runner import PlaybookRunner
from installer.engine_settings import Settings
from installer.settings import NAMESPACE

from .conftest import REPO, Installer

pytestmark = pytest.mark.cluster
MODULE = "metrics_server"
NAME = "ks-task-actions-test"
#: Never Available: its pods ask for a node no cluster has.
STUCK = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME, "namespace": NAMESPACE},
         "spec": {"selector": {"matchLabels": {"app": NAME}}, "template": {
             "metadata": {"labels": {"app": NAME}},
             "spec": {"nodeSelector": {"kubernetes.io/hostname": "no-such-node"},
                      "containers": [{"name": "c", "image": "busybox"}]}}}}
CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE},
          "data": {"a": "b"}}


def _playbooks(tmp_path: Path, tasks: list[dict[str, Any]]) -> Path:
    """A directory of plays where the module's play runs ``tasks`` (installer.engine.plays)."""
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir()
    play = {"hosts": "localhost", "gather_facts": False, "tasks": tasks}
    (playbooks / f"{MODULE}.yaml").write_text(yaml.safe_dump([play]))
    return playbooks


@pytest.fixture
def cleanup(installer: Installer) -> Any:
    yield
    apps, core = client.AppsV1Api(installer.api), client.CoreV1Api(installer.api)
    for delete in (apps.delete_namespaced_deployment, core.delete_namespaced_config_map):
        with contextlib.suppress(ApiException):
            delete(NAME, NAMESPACE)


def test_a_cancelled_run_leaves_no_process_and_keeps_what_its_tasks_recorded(
        installer: Installer, tmp_path: Path, cleanup: None) -> None:
    playbooks = _playbooks(tmp_path, [
        {"name": "Apply", "ks_manifest": {"module": MODULE, "definition": [CONFIG]}},
        {"name": "Read", "ks_info": {"kind": "ConfigMap", "name": NAME, "namespace": NAMESPACE}, "register": "read",
         "failed_when": "read.resources[0].data.a != 'b'"},
        {"name": "Wait forever", "ks_manifest": {"module": MODULE, "definition": [STUCK],
                                                 "wait": True, "wait_timeout": 3600}},
    ])
    base = tmp_path / "kubesphere"
    settings = dataclasses.replace(Settings.from_env(), base_dir=base, playbooks_dir=playbooks,
                                   roles_dir=REPO / "roles", results_dir=base / "results", run_dir=base / "run",
                                   max_parallel=1, module_timeout=600)
    cancel = threading.Event()
    started: list[str] = []

    def on_task(module: str, number: int, name: str) -> None:
        started.append(name)
        if name == "Wait forever":
            threading.Timer(3, cancel.set).start()  # while the worker waits for the Deployment

    outcome = PlaybookRunner(settings, {}, cancel, on_task).run(Step(MODULE, Action.INSTALL))

    assert outcome.status == "canceled", outcome
    assert started == ["Apply", "Read", "Wait forever"]
    assert processes_naming(playbooks) == {}
    # The tasks ran in the workers with the run's environment: the kubeconfig and the run's inventory file.
    assert ("v1", "ConfigMap", NAMESPACE, NAME) in outcome.inventory
