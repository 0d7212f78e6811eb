"""A module's install and uninstall plays: ``playbooks/install.yaml`` and ``playbooks/uninstall.yaml``, one file each
for every module, run with the module's name and role as variables (``ks_module``, ``ks_role``).

Install runs ``kubesphere-defaults`` then the module's role on localhost; uninstall runs ``kubesphere-defaults`` then
the role's ``tasks/uninstall.yaml``. What the module's hash covers and a render runs is the play as it runs for the
module (:func:`module_plays`: parsed, those variables filled in). A directory of plays (``KS_PLAYBOOKS_DIR``, unset in
the image) may replace a module's play: ``<dir>/<name>.yaml`` (install/upgrade) or ``<dir>/<name>-uninstall.yaml``,
when present, is the play that runs and that the module's hash covers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from installer.engine_settings import playbooks_home
from installer.modules import Module

INSTALL, UNINSTALL = "install.yaml", "uninstall.yaml"
"""The playbooks every module runs, in ``playbooks/`` (installer.engine_settings.playbooks_home)."""
_VARIABLE = re.compile(r"\{\{\s*(ks_module|ks_role)\s*\}\}")


def file_name(module: Module, uninstall: bool = False) -> str:
    """The file name of a play that replaces the module's, in a directory of plays (and what its hash names)."""
    return f"{module.name}-uninstall.yaml" if uninstall else f"{module.name}.yaml"


def play_variables(module: Module) -> dict[str, Any]:
    """The variables the shared plays take: the module's name and its role; and the registry's facts its role reads
    (Module.run_facts: its namespaces and certificates), for its runs and renders alike."""
    return {"ks_module": module.name, "ks_role": module.role, **module.run_facts()}


def shared_playbook(uninstall: bool = False, home: Path | None = None) -> Path:
    """``playbooks/install.yaml`` or ``playbooks/uninstall.yaml`` (``home``: the directory holding them)."""
    return (home or playbooks_home()) / (UNINSTALL if uninstall else INSTALL)


def _filled(value: Any, variables: dict[str, Any]) -> Any:
    """``value`` with each ``{{ ks_module }}`` and ``{{ ks_role }}`` in its strings replaced by the module's."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: variables[m.group(1)], value)
    if isinstance(value, list):
        return [_filled(v, variables) for v in value]
    if isinstance(value, dict):
        return {_filled(k, variables): _filled(v, variables) for k, v in value.items()}
    return value


def module_plays(module: Module, uninstall: bool = False, home: Path | None = None) -> list[dict[str, Any]]:
    """The shared play as it runs for ``module``: parsed, its ``ks_module`` and ``ks_role`` filled in."""
    import yaml

    return _filled(yaml.safe_load(shared_playbook(uninstall, home).read_text()), play_variables(module))


def dump(plays: list[dict[str, Any]]) -> str:
    """``plays`` as a playbook file's text: block YAML with sequences indented under their key. (PyYAML is imported
    here and in module_plays: a reconcile with nothing to do reads no play.)"""
    import yaml

    class Dumper(yaml.SafeDumper):
        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, False)

    return yaml.dump(plays, Dumper=Dumper, sort_keys=False, explicit_start=True)


def _replacing(module: Module, uninstall: bool, plays_dir: Path | None) -> Path | None:
    """``plays_dir``'s file for the module, when there is one."""
    if plays_dir is not None and (replaced := plays_dir / file_name(module, uninstall)).is_file():
        return replaced
    return None


def playbook_file(module: Module, uninstall: bool = False, plays_dir: Path | None = None) -> Path:
    """The playbook file a run of the module executes: ``plays_dir``'s file for it, else the shared one."""
    return _replacing(module, uninstall, plays_dir) or shared_playbook(uninstall)


def play_text(module: Module, uninstall: bool = False, plays_dir: Path | None = None) -> str:
    """The play as the module's hash covers it: ``plays_dir``'s file for the module when there is one, else the
    shared play as it runs for the module (:func:`module_plays`, dumped)."""
    replaced = _replacing(module, uninstall, plays_dir)
    return replaced.read_text() if replaced else dump(module_plays(module, uninstall))


def plays_of(module: Module, uninstall: bool = False, plays_dir: Path | None = None) -> list[dict[str, Any]]:
    """The plays that run for the module: ``plays_dir``'s file for it, parsed, else :func:`module_plays`."""
    replaced = _replacing(module, uninstall, plays_dir)
    if replaced is None:
        return module_plays(module, uninstall)
    import yaml

    return yaml.safe_load(replaced.read_text())
