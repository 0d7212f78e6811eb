"""Other packages' private names (installer.launch.ansible_private, cpython_private, kubernetes_private): each works on
the release installed here, refuses or falls back on another, and the installed releases are the ones they were
written for (these tests fail once a pin moves, until the names are reviewed)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
import tomllib
from collections import ChainMap
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.lookup import template as builtin_template
from kubernetes.config import kube_config

from installer.engine.plan import Action, Step
from installer.engine.runner import PlaybookRunner
from installer.engine_settings import Settings
from installer.launch import ansible_private, cpython_private, forkserver, kubernetes_private
from installer.process_exit import exit_now

REPO = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return dict(d.split("==", 1) for d in deps)


def test_the_installed_releases_are_the_ones_the_private_names_were_written_for() -> None:
    pins = _pins()
    assert ansible_private.WRITTEN_FOR == pins["ansible-core"] == ansible_private.ansible_core_version()
    assert kubernetes_private.WRITTEN_FOR == pins["kubernetes"] == kubernetes_private.kubernetes_version()
    assert ansible_private.written_for() and cpython_private.written_for()


# --- ansible-core -----------------------------------------------------------------------------------------------


def test_the_task_actions_private_names_refuse_another_ansible_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ansible_private, "ansible_core_version", lambda: "2.20.0")
    calls = [lambda: ansible_private.task_of(object()), lambda: ansible_private.plugin_name(object()),
             lambda: ansible_private.task_environment(object()), lambda: ansible_private.no_log_values(object()),
             lambda: ansible_private.as_module_failure({"failed": True, "msg": "m"})]
    for call in calls:
        with pytest.raises(ansible_private.UnsupportedRelease) as refused:
            call()
        assert "ansible-core 2.19.14" in str(refused.value) and "ansible-core 2.20.0 is installed" in str(refused.value)
        assert "installer/launch/ansible_private.py" in str(refused.value)


def test_no_log_values_and_module_failures_on_the_installed_release() -> None:
    validation = ArgumentSpecValidator({"password": {"type": "str", "no_log": True}, "name": {"type": "str"}}
                                       ).validate({"password": "s3cret-value", "name": "plain"})
    assert ansible_private.no_log_values(validation) == {"s3cret-value"}
    failed: dict[str, Any] = {"failed": True, "msg": "broken"}
    ansible_private.as_module_failure(failed)
    assert type(failed["exception"]).__name__ == "CapturedErrorSummary" and failed["msg"] == "broken"
    ok: dict[str, Any] = {"changed": False, "exception": None}
    ansible_private.as_module_failure(ok)
    assert ok == {"changed": False}


def test_a_ks_task_in_a_real_run_names_its_plugin_skips_check_mode_and_takes_its_environment(tmp_path: Path) -> None:
    """The task's Task, plugin name and ``environment:`` as the action plugin reads them, in ansible-playbook."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
                                          "contexts": [], "current-context": "set-by-the-task-environment"}))
    out = tmp_path / "out.json"
    tasks = [
        {"name": "Unsupported", "ks_failed": {"bogus": 1}, "register": "unsupported", "ignore_errors": True},
        {"name": "Check mode", "ks_manifest": {"module": "telemetry", "definition": []}, "check_mode": True,
         "register": "checked"},
        {"name": "Environment", "ks_info": {"kind": "ConfigMap", "name": "x", "namespace": "y"},
         "environment": {"KUBECONFIG": str(kubeconfig)}, "register": "env", "ignore_errors": True},
        {"name": "Write", "ansible.builtin.copy": {"dest": str(out), "mode": "0600", "content":
         "{{ {'unsupported': unsupported.msg, 'checked': checked.msg, 'env': env.msg} | to_json }}"}},
    ]
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir()
    (playbooks / "telemetry.yaml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False,
                                                                "tasks": tasks}]))
    settings = Settings(base_dir=tmp_path, playbooks_dir=playbooks, roles_dir=REPO / "roles",
                        results_dir=tmp_path / "results", run_dir=tmp_path / "run", max_parallel=1,
                        module_timeout=300, console_timeout=60, drift_interval=0)
    outcome = PlaybookRunner(settings, {}, threading.Event()).run(Step("telemetry", Action.INSTALL))
    assert outcome.ok, outcome
    seen = json.loads(out.read_text())
    assert seen["unsupported"].startswith("Unsupported parameters for (ks_failed) module: bogus.")
    assert seen["checked"] == "remote module (ks_manifest) does not support check mode"
    assert "set-by-the-task-environment" in seen["env"] and str(kubeconfig) in seen["env"]


def test_the_template_lookup_layers_the_variables_only_on_the_installed_release(
        monkeypatch: pytest.MonkeyPatch) -> None:
    variables = {"spec": {"a": [1]}}
    with ansible_private.template_lookup_without_copy():
        layered = builtin_template.deepcopy(variables)
    assert isinstance(layered, ChainMap) and layered.maps == [{}, variables]
    layered["template_path"] = "x"
    assert variables == {"spec": {"a": [1]}}
    assert builtin_template.deepcopy is copy.deepcopy  # put back
    monkeypatch.setattr(ansible_private, "ansible_core_version", lambda: "2.20.0")
    with ansible_private.template_lookup_without_copy():
        assert builtin_template.deepcopy is copy.deepcopy  # another release: the built-in lookup as it is


# --- kubernetes -------------------------------------------------------------------------------------------------


def test_kubeconfig_temp_files_are_the_clients_own_or_none_on_another_release(monkeypatch: pytest.MonkeyPatch) -> None:
    assert kubernetes_private.kubeconfig_temp_files() is kube_config._temp_files
    monkeypatch.setattr(kubernetes_private, "kubernetes_version", lambda: "34.0.0")
    assert kubernetes_private.kubeconfig_temp_files() == {}


# --- CPython ----------------------------------------------------------------------------------------------------


def test_cpythons_private_names_refuse_another_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpython_private, "python_version", lambda: ("cpython", (3, 14)))
    for call in (cpython_private.end_threads, cpython_private.run_exit_handlers, cpython_private.clear_exit_handlers):
        with pytest.raises(cpython_private.UnsupportedPython, match=r"CPython 3\.11, and this is cpython 3\.14"):
            call()


def test_another_interpreter_exits_normally_and_runs_ansible_playbook_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(forkserver.SWITCH_ENV, raising=False)
    assert forkserver.enabled()
    monkeypatch.setattr(cpython_private, "python_version", lambda: ("pypy", (3, 11)))
    assert not forkserver.enabled()
    assert forkserver.ForkServer().client() is None
    with pytest.raises(SystemExit) as exited:
        exit_now(3)
    assert exited.value.code == 3


def test_cleared_exit_handlers_do_not_run() -> None:
    script = ("import atexit; from installer.launch import cpython_private\n"
              "atexit.register(print, 'parent handler')\n"
              "cpython_private.clear_exit_handlers()\n"
              "atexit.register(print, 'own handler')\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=True)
    assert proc.stdout == "own handler\n"
