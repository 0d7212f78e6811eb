"""A module's install and uninstall plays, built from its registry entry (installer.modules).

Install runs ``kubesphere-defaults`` then the module's role on localhost; uninstall runs ``kubesphere-defaults`` then
the role's ``tasks/uninstall.yaml``. A directory of plays (``KS_PLAYBOOKS_DIR``, unset in the image) may replace a
module's play: ``<dir>/<name>.yaml`` (install/upgrade) or ``<dir>/<name>-uninstall.yaml``, when present, is the play
that runs and that the module's hash covers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from installer.modules import Module

DEFAULTS_ROLE = "kubesphere-defaults"
"""The role every play runs first: the image catalogue and the defaults the module roles read."""


def file_name(module: Module, uninstall: bool = False) -> str:
    """The play's file name: in a run's private dir, and in a directory of plays that replaces it."""
    return f"{module.name}-uninstall.yaml" if uninstall else f"{module.name}.yaml"


def generated(module: Module, uninstall: bool = False) -> list[dict[str, Any]]:
    """The plays that install (or uninstall) ``module`` with its role."""
    play: dict[str, Any] = {"name": f"{'Uninstall' if uninstall else 'Install'} {module.name}", "hosts": "localhost",
                            "gather_facts": False}
    if uninstall:
        return [{**play, "roles": [DEFAULTS_ROLE], "tasks": [
            {"name": f"Remove {module.name}",
             "ansible.builtin.include_role": {"name": module.role, "tasks_from": "uninstall"}}]}]
    return [{**play, "roles": [DEFAULTS_ROLE, module.role]}]


def dump(plays: list[dict[str, Any]]) -> str:
    """``plays`` as a playbook file's text: block YAML with sequences indented under their key. (PyYAML is imported
    here and in plays_of: a reconcile with nothing to do reads no play.)"""
    import yaml

    class Dumper(yaml.SafeDumper):
        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, False)

    return yaml.dump(plays, Dumper=Dumper, sort_keys=False, explicit_start=True)


def play_text(module: Module, uninstall: bool = False, plays_dir: Path | None = None) -> str:
    """The playbook text that runs: ``plays_dir``'s file for the module when there is one, else the generated."""
    replaced = _replacing(module, uninstall, plays_dir)
    return replaced.read_text() if replaced else dump(generated(module, uninstall))


def _replacing(module: Module, uninstall: bool, plays_dir: Path | None) -> Path | None:
    """``plays_dir``'s file for the module, when there is one."""
    if plays_dir is not None and (replaced := plays_dir / file_name(module, uninstall)).is_file():
        return replaced
    return None


def plays_of(module: Module, uninstall: bool = False, plays_dir: Path | None = None) -> list[dict[str, Any]]:
    """The plays that run: ``plays_dir``'s file for the module, parsed, else the generated."""
    replaced = _replacing(module, uninstall, plays_dir)
    if replaced is None:
        return generated(module, uninstall)
    import yaml

    return yaml.safe_load(replaced.read_text())


def write_playbook(directory: Path, module: Module, uninstall: bool = False, plays_dir: Path | None = None) -> Path:
    """Write the module's playbook into ``directory`` (a run's private dir) and return its path."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / file_name(module, uninstall)
    path.write_text(play_text(module, uninstall, plays_dir))
    return path
