"""Run the project's roles outside a cluster: render plays with ansible-playbook, load filter plugins."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from installer.engine.runner import ansible_environment

REPO = Path(__file__).resolve().parents[1]
ROLES = REPO / "roles"
ACTION_PLUGINS = Path(__file__).resolve().parent / "ansible_capture" / "action_plugins"
COPY = ("ansible.builtin.copy", "ansible.legacy.copy", "copy")


def in_process(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tasks`` with each ``copy`` of ``content`` to ``dest`` done by the harness's ``harness_write`` action
    (same file, written in Ansible's own process: no module process per file), blocks included."""
    out = []
    for task in tasks:
        task = {k: in_process(v) if k in ("block", "rescue", "always") else v for k, v in task.items()}
        action = next((k for k in COPY if k in task), None)
        if action and set(task[action]) <= {"content", "dest"}:
            task = {("harness_write" if k == action else k): v for k, v in task.items()}
        out.append(task)
    return out


def run_play(play: dict[str, Any], out: Path) -> None:
    """Run ``play`` on localhost with the project's roles (files it writes go to ``out``); fail on error.
    Its ``copy`` tasks that write ``content`` run in-process (see ``in_process``)."""
    play = {**play, **{k: in_process(play[k]) for k in ("pre_tasks", "tasks", "post_tasks") if k in play}}
    playbook = out / "render.yaml"
    playbook.write_text(yaml.safe_dump([play]))
    env = {**os.environ, **ansible_environment(out), "ANSIBLE_ROLES_PATH": str(ROLES),
           "ANSIBLE_ACTION_PLUGINS": str(ACTION_PLUGINS)}
    env.pop("ANSIBLE_CALLBACK_PLUGINS")  # no ks_preload: the harness's plays call no ks_* task
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def filter_plugins(role: str, name: str) -> ModuleType:
    """A role's ``filter_plugins/<name>.py`` as a module, to test its functions directly."""
    spec = importlib.util.spec_from_file_location(f"{role}_{name}", ROLES / role / "filter_plugins" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


Objects = list[dict[str, Any]]


def registry_facts(name: str) -> dict[str, Any]:
    """The registry's facts the engine hands every run of the module ``name`` (or of the module whose role it is):
    its named namespaces and its certificates (installer.modules.Module.run_facts)."""
    from installer.modules import MODULES

    return next(m for m in MODULES if name in (m.name, m.role)).run_facts()


def engine_vars(module: str) -> dict[str, Any]:
    """The variables the engine gives every playbook of ``module`` besides the spec and cluster facts."""
    return {"ks_module": module, "ks_namespace": "kubesphere-system", "ks_version": "v3.4.1",
            **registry_facts(module)}


def render_scenarios(role: str, fact: str, scenarios: dict[str, dict[str, Any]], out: Path,
                     play_vars: dict[str, Any] | None = None) -> dict[str, Objects]:
    """Render ``role``'s ``tasks/render.yaml`` once per scenario (its variables) in one ansible-playbook run;
    the objects each scenario left in ``fact``. ``play_vars`` default to the engine's for the module ``role``."""
    play_vars = engine_vars(role) if play_vars is None else play_vars
    tasks = []
    for name, variables in scenarios.items():
        tasks += [{"ansible.builtin.include_role": {"name": role, "tasks_from": "render"}, "vars": variables},
                  {"harness_write": {"content": f"{{{{ {fact} | to_json }}}}", "dest": str(out / f"{name}.json")}}]
    run_play({"hosts": "localhost", "gather_facts": False, "roles": ["kubesphere-defaults"], "tasks": tasks,
              "vars": play_vars}, out)
    return {name: json.loads((out / f"{name}.json").read_text()) for name in scenarios}


def find(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name} rendered {len(found)} times"
    return found[0]


def keys(objects: Objects) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in objects}


def pod(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    return find(objects, kind, name)["spec"]["template"]["spec"]
