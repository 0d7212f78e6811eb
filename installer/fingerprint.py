"""A module's fingerprint: what it was (or will be) installed from.

hash = sha256(canonical JSON of its normalised inputs + digest of its install playbook, the roles that
playbook uses (with their meta dependencies) and the shared Ansible modules + installer version). Equal
hashes mean re-running the module would change nothing.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from installer import __version__
from installer.modules import Module
from installer.spec import Spec, get

#: Directories beside the playbooks that every playbook uses (the installer's Ansible modules).
SHARED_PLAYBOOK_DIRS = ("library",)
_INCLUDE_ROLE = ("include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role")


def inputs_of(module: Module, spec: Spec) -> dict[str, Any]:
    """The module's input values, keyed by dotted path (missing paths are ``None``)."""
    return {path: get(spec, path) for path in module.all_inputs}


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _role_refs(items: Any) -> set[str]:
    """Role names referenced by plays, tasks (include/import_role) and meta dependencies."""
    found: set[str] = set()
    if isinstance(items, list):
        for item in items:
            found |= _role_refs(item)
    elif isinstance(items, dict):
        for key, value in items.items():
            if key in ("roles", "dependencies") and isinstance(value, list):
                found |= {r if isinstance(r, str) else r.get("role") or r.get("name") for r in value}
            elif key in _INCLUDE_ROLE and isinstance(value, dict):
                found.add(value["name"])
            else:
                found |= _role_refs(value)
    return {r for r in found if r}


def roles_used(playbook: Path, roles_dir: Path) -> list[str]:
    """Every role the playbook needs, following role task files and meta dependencies."""
    todo = _role_refs(yaml.safe_load(playbook.read_text())) if playbook.exists() else set()
    seen: set[str] = set()
    while todo:
        role = todo.pop()
        seen.add(role)
        for f in sorted((roles_dir / role).glob("*/*.y*ml")):
            if f.parent.name in ("tasks", "meta", "handlers"):
                todo |= _role_refs(yaml.safe_load(f.read_text())) - seen
    return sorted(seen)


def _digest_paths(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for root in paths:
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for f in files:
            if not f.exists() or "__pycache__" in f.parts:
                continue
            h.update(f"{root.name}/{f.relative_to(root) if f != root else ''}".encode())
            h.update(b"\0")
            h.update(f.read_bytes())
    return h.hexdigest()


@cache
def files_digest(module: Module, playbooks_dir: Path, roles_dir: Path) -> str:
    """Digest of the module's install playbook, its roles and the shared Ansible modules."""
    playbook = playbooks_dir / module.playbook
    paths = [playbook] + [playbooks_dir / d for d in SHARED_PLAYBOOK_DIRS]
    paths += [roles_dir / r for r in roles_used(playbook, roles_dir)]
    return _digest_paths(paths)


def module_hash(module: Module, inputs: dict[str, Any], files: str) -> str:
    payload = canonical({"module": module.name, "inputs": inputs, "files": files, "version": __version__})
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
