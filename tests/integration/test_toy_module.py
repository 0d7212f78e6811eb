"""Adding a module takes its registry entry and its role, nothing else: a copy of the installer with one more
``Module`` in installer/modules.py and one more role under roles/ installs it when its switch turns on (the generic
plays, the change set, the status and the log as for any module; its namespace from its entry, as its run's
variable) and uninstalls it when the switch turns off, on the default platform, running nothing else of it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from installer_state import REPO
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import MODULE_LABEL

from .conftest import Installer
from .test_adoption import run_actions

pytestmark = [pytest.mark.cluster, pytest.mark.platform]

TOY_NAMESPACE = "toy-system"
#: The registry entry: on with Calico IP pools (a switch the schema already has), after ks-core; its namespace, which
#: its role reads as ks_toy_namespace.
ENTRY = f"""    Module("toy", equals("network.ippool.type", "calico"), ("network.ippool",), ("ks-core",),
           workloads=False, namespaces=Namespaces(toy="{TOY_NAMESPACE}")),
"""
ROLE = {
    "tasks/main.yaml": """---
- name: Toy | Apply its namespace and settings
  ks_manifest:
    module: "{{ ks_module }}"
    definition:
      - {apiVersion: v1, kind: Namespace, metadata: {name: "{{ ks_toy_namespace }}"}}
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: toy-settings, namespace: "{{ ks_toy_namespace }}"}
        data: {ippool: "{{ network.ippool.type }}"}
""",
    "tasks/uninstall.yaml": """---
- name: Toy | Remove what it made
  ks_manifest:
    module: "{{ ks_module }}"
    state: absent
""",
}


def installer_with_a_toy_module(root: Path) -> Path:
    """A copy of the installer (package, roles, plays) with the toy module's registry entry and role added."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("installer", "roles", "playbooks"):
        shutil.copytree(REPO / part, root / part, ignore=ignore)
    registry = root / "installer" / "modules.py"
    text = registry.read_text()
    end = text.index("\n)\n", text.index("MODULES: tuple[Module, ...] = ("))
    registry.write_text(text[: end + 1] + ENTRY + text[end + 1:])
    for path, content in ROLE.items():
        (root / "roles" / "toy" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "roles" / "toy" / path).write_text(content)
    return root


def reconcile(installer: Installer, root: Path) -> subprocess.CompletedProcess[str]:
    """A reconcile by the copy (``python -m installer`` from it)."""
    env = installer.environ(PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-m", "installer", "reconcile"], env=env, cwd=root, capture_output=True,
                          text=True, timeout=600, check=False)


def settings(api: client.ApiClient) -> client.V1ConfigMap | None:
    try:
        return client.CoreV1Api(api).read_namespaced_config_map("toy-settings", TOY_NAMESPACE)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_a_module_added_by_its_registry_entry_and_its_role_installs_and_uninstalls(installer: Installer,
                                                                                  tmp_path: Path) -> None:
    root = installer_with_a_toy_module(tmp_path / "copy")
    installer.apply_cc(network={"ippool": {"type": "calico"}})
    proc = reconcile(installer, root)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Start installing toy" in proc.stderr and "task toy status is successful" in proc.stderr, proc.stderr[-3000:]
    made = settings(installer.api)
    assert made is not None and made.data == {"ippool": "calico"}
    assert made.metadata.labels[MODULE_LABEL] == "toy"
    assert installer.status()["modules"]["toy"]["phase"] == "Installed"
    # Its run reports the change set it carried out, as every module's does.
    assert run_actions(installer.results)["toy"] == {f"Namespace/{TOY_NAMESPACE}": "create",
                                                     f"ConfigMap/{TOY_NAMESPACE}/toy-settings": "create"}

    installer.apply_cc(network={"ippool": {"type": "none"}})
    proc = reconcile(installer, root)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Start uninstalling toy" in proc.stderr, proc.stderr[-3000:]
    assert settings(installer.api) is None
    namespaces = {n.metadata.name for n in client.CoreV1Api(installer.api).list_namespace().items
                  if not n.metadata.deletion_timestamp}
    assert TOY_NAMESPACE not in namespaces
    assert installer.status()["modules"]["toy"]["phase"] == "Uninstalled"
