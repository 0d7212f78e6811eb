"""Run the project's roles outside a cluster: render plays with ansible-playbook, load filter plugins."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
ROLES = REPO / "roles"


def run_play(play: dict[str, Any], out: Path) -> None:
    """Run ``play`` on localhost with the project's roles (files it writes go to ``out``); fail on error."""
    playbook = out / "render.yaml"
    playbook.write_text(yaml.safe_dump([play]))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROLES), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOME": str(out / ".ansible"), "ANSIBLE_LOCAL_TEMP": str(out / "tmp")}
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
