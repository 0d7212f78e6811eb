"""A module's fingerprint: what it was (or will be) installed from.

hash = sha256(canonical JSON of its normalised inputs + digest of all code the module runs). The code is its install
play (installer.engine.plays: playbooks/install.yaml as it runs for the module, or the file that replaces it), the
roles that play uses (with their meta dependencies and filter plugins), the installer's ``ks_*`` tasks those roles call
(``installer/ansible_tasks``) and the engine files those import (followed transitively: the Ansible side); with it,
the module's own registry facts its runs receive as data (Module.run_facts: its namespaces and certificates), not the
registry's file.
Equal hashes mean re-running the module would change nothing; a change to a file re-runs exactly the modules that
execute it, and an installer upgrade that changes none of them (the engine alone, or only its version) runs none.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from installer.engine.plays import file_name, play_text, plays_of
from installer.engine.unset import without_unset
from installer.engine_settings import playbooks_home
from installer.modules import MODULES, Module
from installer.spec import Spec, get

ENGINE_PACKAGE = "installer"
ENGINE_DIR = Path(__file__).resolve().parents[1]
TASKS_PACKAGE = "ansible_tasks"
_INCLUDE_ROLE = ("include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role")


def _load(path: Path) -> Any:
    """A role file's data (not to be changed: it is shared by every module that reads the file)."""
    st = path.stat()
    return _load_at(str(path), st.st_size, st.st_mtime_ns)


@cache
def _load_at(path: str, _size: int, _mtime: int) -> Any:
    """:func:`_load`, parsed once per version of the file: modules share roles (kubesphere-defaults) and tasks."""
    from installer import yaml_c  # only when digests are computed: a reconcile with nothing to do reuses them

    return yaml_c.load(Path(path).read_text())


def inputs_of(module: Module, spec: Spec) -> dict[str, Any]:
    """The module's input values, keyed by dotted path (missing paths are ``None``; an empty value that means unset
    is absent too: installer.engine.unset)."""
    return {path: without_unset(path, get(spec, path)) for path in module.all_inputs}


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


def roles_used(plays: Any, roles_dir: Path) -> list[str]:
    """Every role the plays need, following role task files and meta dependencies."""
    todo = _role_refs(plays)
    seen: set[str] = set()
    while todo:
        role = todo.pop()
        seen.add(role)
        for f in sorted((roles_dir / role).glob("*/*.y*ml")):
            if f.parent.name in ("tasks", "meta", "handlers"):
                todo |= _role_refs(_load(f)) - seen
    return sorted(seen)


def _yaml_keys(node: Any) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _yaml_keys(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _yaml_keys(value)


def _task_files(roles: list[Path]) -> list[Path]:
    return [f for r in roles for f in sorted(r.glob("*/*.y*ml")) if f.parent.name in ("tasks", "handlers")]


def tasks_used(plays: Any, roles: list[Path], tasks_dir: Path) -> list[Path]:
    """The files of the installer's ``ks_*`` tasks that the plays call."""
    available = {p.stem: p for p in tasks_dir.glob("ks_*.py")}
    keys = set(_yaml_keys(plays)) | {k for f in _task_files(roles) for k in _yaml_keys(_load(f))}
    return [available[k] for k in sorted(keys & available.keys())]


def _imports(source: Path) -> frozenset[str]:
    """Dotted names of the engine modules ``source`` imports."""
    st = source.stat()
    return _imports_at(str(source), st.st_size, st.st_mtime_ns)


@cache
def _imports_at(source: str, _size: int, _mtime: int) -> frozenset[str]:
    """:func:`_imports`, parsed once per version of the file: most modules' tasks import the same engine code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(Path(source).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return frozenset(n for n in names if n == ENGINE_PACKAGE or n.startswith(ENGINE_PACKAGE + "."))


def _engine_file(name: str, engine_dir: Path) -> list[Path]:
    """The files that importing dotted ``name`` executes: each package's ``__init__`` and the module."""
    parts = name.split(".")[1:]
    out = [engine_dir / "__init__.py"]
    for i in range(1, len(parts) + 1):
        base = engine_dir.joinpath(*parts[:i])
        out += [p for p in (base / "__init__.py", base.with_suffix(".py")) if p.is_file()]
    return out


def engine_code(sources: list[Path], engine_dir: Path = ENGINE_DIR) -> list[Path]:
    """Every engine file that ``sources`` import, directly or through each other."""
    seen: set[Path] = set()
    todo = list(sources)
    while todo:
        for name in _imports(todo.pop()):
            for f in _engine_file(name, engine_dir):
                if f not in seen:
                    seen.add(f)
                    todo.append(f)
    return sorted(seen)


def _digest_paths(paths: list[Path], play: tuple[str, str] | None = None, facts: dict[str, Any] | None = None) -> str:
    """Digest of the files under ``paths``, each named by its root's name, after ``play`` (file name, text) and the
    module's registry ``facts`` (Module.run_facts)."""
    h = hashlib.sha256()
    if play is not None:
        h.update(f"{play[0]}/".encode())
        h.update(b"\0")
        h.update(play[1].encode())
    if facts:
        h.update(b"facts\0")
        h.update(canonical(facts).encode())
    for root in paths:
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for f in files:
            if not f.exists() or "__pycache__" in f.parts:
                continue
            h.update(f"{root.name}/{f.relative_to(root) if f != root else ''}".encode())
            h.update(b"\0")
            h.update(f.read_bytes())
    return h.hexdigest()


def code_files(module: Module, roles_dir: Path, engine_dir: Path = ENGINE_DIR,
               plays_dir: Path | None = None) -> list[Path]:
    """The files the module's install play runs: roles, the ``ks_*`` tasks they call and the engine code those
    import (``plays_dir``: see installer.engine.plays)."""
    plays = plays_of(module, plays_dir=plays_dir)
    roles = [roles_dir / r for r in roles_used(plays, roles_dir)]
    tasks = tasks_used(plays, roles, engine_dir / TASKS_PACKAGE)
    plugins = [p for r in roles for p in sorted(r.rglob("*.py"))]
    return [*roles, *tasks, *engine_code(tasks + plugins, engine_dir)]


@cache
def files_digest(module: Module, roles_dir: Path, engine_dir: Path = ENGINE_DIR,
                 plays_dir: Path | None = None) -> str:
    """Digest of the module's install play, its registry facts (the data its role reads: Module.run_facts) and its
    :func:`code_files`."""
    play = (file_name(module), play_text(module, plays_dir=plays_dir))
    return _digest_paths(code_files(module, roles_dir, engine_dir, plays_dir), play, module.run_facts())


class DigestCache:
    """:func:`files_digest` per module, kept in a file and reused while no file under the roles, the engine, playbooks/
    or the plays that replace a module's changed (same paths, sizes and modification times): hashing
    parses every role and engine import, which a reconcile with nothing to do should not pay for."""

    def __init__(self, path: Path | None, roles_dir: Path, engine_dir: Path = ENGINE_DIR,
                 plays_dir: Path | None = None) -> None:
        self.path, self.dirs, self.plays_dir = path, (roles_dir, engine_dir), plays_dir
        self._signature: str | None = None
        self._digests: dict[str, str] | None = None

    def signature(self) -> str:
        """The paths, sizes and modification times of every file under the roles, the engine, playbooks/ and the
        plays that replace a module's."""
        if self._signature is None:
            h = hashlib.sha256()
            for root in (*self.dirs, playbooks_home(), *([self.plays_dir] if self.plays_dir is not None else [])):
                for path, size, mtime in sorted(_files(str(root))):
                    h.update(f"{path}\0{size}\0{mtime}\n".encode())
            self._signature = h.hexdigest()
        return self._signature

    def _load(self) -> dict[str, str]:
        if self._digests is None:
            self._digests = {}
            if self.path is not None:
                try:
                    saved = json.loads(self.path.read_text())
                    if saved.get("signature") == self.signature():
                        self._digests = dict(saved.get("digests") or {})
                except (OSError, ValueError, AttributeError):
                    pass
        return self._digests

    def __call__(self, module: Module) -> str:
        digests = self._load()
        if module.name not in digests:
            # Every module's at once: they share most of their files (each parsed once), so all cost about twice
            # what one does, and switching a module on later finds its digest here.
            for other in (module, *MODULES):
                if other.name not in digests:
                    digests[other.name] = files_digest(other, *self.dirs, plays_dir=self.plays_dir)
            self._save()
        return digests[module.name]

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"signature": self.signature(), "digests": self._digests}))
            tmp.replace(self.path)
        except OSError:
            pass  # a cache: computing again next time is fine


def _files(root: str) -> Iterator[tuple[str, int, int]]:
    """Path, size and modification time of each file under ``root``, ``__pycache__`` left out (os.scandir: a
    tenth of the CPU of Path.rglob and a stat per path, on every reconcile)."""
    with os.scandir(root) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):  # as Path.rglob: a link to a directory is not followed
                if entry.name != "__pycache__":
                    yield from _files(entry.path)
            else:
                st = entry.stat()
                yield entry.path, st.st_size, st.st_mtime_ns


def module_hash(module: Module, inputs: dict[str, Any], files: str) -> str:
    payload = canonical({"module": module.name, "inputs": inputs, "files": files})
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
