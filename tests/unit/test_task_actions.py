"""The ks_* tasks run in Ansible's worker process (each task's file is its action plugin), with the results the same
task gives as an Ansible module in a process of its own. No cluster: every task fails the same way."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from installer import yaml_c
from installer.ansible_tasks import argument_spec, task, task_names
from installer.engine.runner import TASKS_DIR, ansible_environment

REPO = Path(__file__).resolve().parents[2]
TASKS = task_names()
#: Each task as an Ansible module of its own (what a task was before it ran in the worker), for the comparison.
MODULE = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import TaskFailed
from installer.ansible_tasks import {name} as task


def main():
    module = AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE)
    try:
        result = task.run(module.params)
    except TaskFailed as exc:
        module.fail_json(msg=exc.msg, **exc.result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
"""
PASSWORD = "Pw-never-shown-4711"
#: Each task with the arguments it needs; without a cluster each one fails on its credentials.
CALLS: dict[str, dict[str, Any]] = {
    "ks_alert_rules": {},
    "ks_core_secret": {"module": "ks-core", "namespace": "kubesphere-system", "admin_password": PASSWORD},
    "ks_failed": {"task": "t", "msg": "m"},
    "ks_found_check": {"objects": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"},
                                    "type": "kubernetes.io/service-account-token"}]},
    "ks_info": {"kind": "Namespace"},
    "ks_manifest": {"module": "redis", "definition": [], "state": "absent"},
    "ks_metadata": {"names": ["default"], "field_manager": "test"},
    "ks_random_secret": {"module": "redis", "namespace": "kubesphere-system", "name": "s", "key": "k"},
    "ks_rollout": {"namespace": "kubesphere-system", "deployments": ["ks-apiserver"], "value": "v"},
    "ks_telemetry": {"url": "http://127.0.0.1:9/"},
    "ks_webhook_cert": {"module": "ks-core", "namespace": "kubesphere-system", "service": "ks-controller-manager",
                        "secret": "ks-controller-manager-webhook-cert", "ca_name": "ks-controller-manager-ca",
                        "cert_name": "ks-core-admission-webhook"},
}
KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "from-task-environment", "contexts": [],
              "clusters": [], "users": []}


def _tasks(kubeconfig: Path) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = [{"name": name, name: args, "register": f"r_{name}", "ignore_errors": True}
                                   for name, args in CALLS.items()]
    tasks += [
        {"name": "environment", "ks_info": {"kind": "Namespace"}, "environment": {"KUBECONFIG": str(kubeconfig)},
         "register": "r_environment", "ignore_errors": True},
        {"name": "hidden", "ks_core_secret": CALLS["ks_core_secret"], "no_log": True, "register": "r_hidden",
         "ignore_errors": True},
        {"name": "missing argument", "ks_rollout": {"namespace": "x", "value": "v"}, "register": "r_missing",
         "ignore_errors": True},
        {"name": "unknown argument", "ks_info": {"kind": "Namespace", "bogus": 1}, "register": "r_unknown",
         "ignore_errors": True},
        {"name": "check mode", "ks_manifest": CALLS["ks_manifest"], "check_mode": True, "register": "r_check"},
        {"name": "check mode supported", "ks_info": {"kind": "Namespace"}, "check_mode": True,
         "register": "r_check_info", "ignore_errors": True},
        {"name": "retried", "ks_info": {"kind": "Namespace"}, "register": "r_retried", "until": "r_retried is success",
         "retries": 1, "delay": 0, "ignore_errors": True},
    ]
    names = [t["register"] for t in tasks]
    dump = "{{ {" + ", ".join(f"'{n}': {n}" for n in names) + "} | to_json }}"
    return [*tasks, {"name": "results", "ansible.builtin.copy": {"content": dump, "dest": "{{ out }}"}}]


def _run(play_dir: Path, out: Path, env: dict[str, str]) -> tuple[dict[str, Any], str]:
    """Run the play in ``play_dir`` at -vvv; its registered results and its output."""
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-vvv", "-i", "localhost,",
                           "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"out={out}",
                           str(play_dir / "play.yaml")],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads(out.read_text()), proc.stdout


def test_each_task_is_one_file_that_is_its_own_action_plugin() -> None:
    assert sorted(CALLS) == TASKS
    assert not list((REPO / "roles").glob("*/action_plugins")), "the ks_* tasks are installer/ansible_tasks/ks_*.py"
    for name in TASKS:
        module = task(name)
        documented = yaml_c.load(module.DOCUMENTATION)
        assert documented["module"] == name
        assert argument_spec(module.DOCUMENTATION) == module.ARGUMENT_SPEC
        assert all(option.get("description") for option in documented["options"].values()), name
        assert module.ActionModule.task is module, name
        assert callable(module.run), name


def test_tasks_run_in_the_worker_with_the_results_of_their_modules(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(KUBECONFIG))
    play = yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": _tasks(kubeconfig)}])
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "missing"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOME": str(tmp_path / ".ansible"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
           "ANSIBLE_REMOTE_TMP": str(tmp_path / "remote")}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    actions = tmp_path / "actions"
    actions.mkdir()
    (actions / "play.yaml").write_text(play)
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "play.yaml").write_text(play)
    library = tmp_path / "library"
    library.mkdir()
    for name in TASKS:
        (library / f"{name}.py").write_text(MODULE.format(name=name))

    # With the installer's plugin settings, as the engine runs a play; then each task as an Ansible module.
    # A KS_CAPTURE_DIR left in the engine's own environment does not make a run record instead of doing.
    capture = tmp_path / "capture"
    capture.mkdir()
    in_worker, shown = _run(actions, tmp_path / "actions.json",
                            {**env, "KS_CAPTURE_DIR": str(capture), **ansible_environment(tmp_path)})
    assert not list(capture.iterdir())
    as_modules, modules_shown = _run(modules, tmp_path / "modules.json", {**env, "ANSIBLE_LIBRARY": str(library)})

    assert not re.findall(r"Using module file \S*/ks_\w+\.py", shown), "a ks_* task ran as a module"
    assert sorted(set(re.findall(r"Using module file \S*/library/(ks_\w+)\.py", modules_shown))) == TASKS
    assert str(TASKS_DIR) in ansible_environment(tmp_path)["ANSIBLE_ACTION_PLUGINS"]
    assert in_worker == as_modules
    missing = "ApiUnavailable: no Kubernetes credentials: Invalid kube-config file. No configuration found."
    for name in TASKS:
        if name != "ks_failed":
            assert in_worker[f"r_{name}"]["msg"] == missing, name
    assert in_worker["r_ks_failed"]["msg"].startswith("ks_failed is a render's record")
    assert "from-task-environment" in in_worker["r_environment"]["msg"]
    assert in_worker["r_missing"]["msg"] == "missing required arguments: deployments"
    assert in_worker["r_unknown"]["msg"].startswith("Unsupported parameters for (ks_info) module: bogus.")
    assert in_worker["r_check"] == {"changed": False, "failed": False, "skipped": True,
                                    "msg": "remote module (ks_manifest) does not support check mode"}
    assert in_worker["r_check_info"]["msg"] == missing
    assert "attempts" in in_worker["r_retried"]
    assert "Module failed: " + missing in shown
    for output in (shown, modules_shown):
        assert PASSWORD not in output
        assert '"admin_password": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"' in output
        assert "the output has been hidden due to the fact that 'no_log: true' was specified" in output
