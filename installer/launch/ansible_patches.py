"""Every change the installer makes to Ansible's or Jinja's own functions, in one place: each makes a module run
cheaper and none changes what a run does. The fork server (installer.launch.forkserver) applies them before it forks a
run, so every run inherits their work; ``ansible-playbook`` started without the server runs unchanged.

Each relies on private names of ansible-core (its collection loader's and configuration manager's functions; for the
template code cache, which wraps Jinja's public ``Environment.compile``, Ansible's embedded-template switch in the cache
key) and applies only on the release they were written for (:data:`WRITTEN_FOR`, the version the project pins,
checked as installer.launch.ansible_private checks it); on another release none is applied and a run costs what
Ansible's own code costs.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import logging
import marshal
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any

from installer.launch import ansible_private
from installer.launch.ansible_private import WRITTEN_FOR

log = logging.getLogger("installer")


def apply(cache_dir: Path) -> list[str]:
    """Apply every patch that fits the installed ansible-core, before Ansible is imported; the names of those
    applied. ``cache_dir`` holds the compiled template code between runs."""
    applied = list(cache_definitions())
    if applied:
        if cache_template_code(cache_dir):
            applied.append("template code")
    else:
        log.debug("ansible-core %s is not %s: its private functions are left alone",
                  ansible_private.ansible_core_version(), WRITTEN_FOR)
    if "ansible.constants" in sys.modules:
        raise RuntimeError("Ansible was imported before a run's environment is known")
    return applied


@functools.cache
def cache_definitions() -> tuple[str, ...]:
    """The parsed files every run reads and no environment changes (the collection metadata, the configuration's
    definitions), cached once per process and by its forks (the warm engine does it once, not every hook run: about
    0.14 CPU-s); the names of those cached."""
    if not ansible_private.written_for():
        return ()
    cache_collection_metadata()
    cache_config_definitions()
    return ("collection metadata", "config definitions")


def cache_collection_metadata() -> None:
    """Parse ``ansible.builtin``'s routing metadata (``ansible_builtin_runtime.yml``, ~10,000 lines) once here, not
    once per run: Ansible's collection loader offers ``_meta_yml_to_dict(data, content_id)`` for exactly this. A run
    gets the parsed dict by fork; what it changes in it stays in its own process."""
    import ansible
    from ansible.utils.collection_loader import _collection_finder, _collection_meta

    parse = _collection_meta._meta_yml_to_dict
    path = Path(ansible.__file__).parent / "config" / "ansible_builtin_runtime.yml"
    raw = path.read_bytes()
    parsed = {("ansible.builtin", "runtime.yml"): (raw, parse(raw, ("ansible.builtin", "runtime.yml")))}

    def cached(data: bytes | str, content_id: Any) -> Any:
        known = parsed.get(content_id) if isinstance(content_id, tuple) else None
        if known is not None and known[0] == data:
            return known[1]
        return parse(data, content_id)

    _collection_meta._meta_yml_to_dict = cached
    _collection_finder._meta_yml_to_dict = cached


def cache_config_definitions() -> None:
    """Read Ansible's configuration definitions (``ansible/config/base.yml``, ~2,000 lines, read when a run imports
    ``ansible.constants``) once here. Only the definitions are cached: the values come from each run's environment."""
    from ansible.config.manager import ConfigManager

    read = ConfigManager._read_config_yaml_file
    definitions: dict[str, Any] = {}

    def cached(self: ConfigManager, yml_file: str | bytes) -> Any:
        key = os.fsdecode(yml_file)
        if key not in definitions:
            definitions[key] = read(self, yml_file)
        return definitions[key]

    ConfigManager._read_config_yaml_file = cached  # type: ignore[method-assign]
    base = Path(sys.modules[ConfigManager.__module__].__file__ or "").parent / "base.yml"
    cached(ConfigManager.__new__(ConfigManager), str(base))


#: What Jinja's code generation depends on besides a template's source: the environment's syntax and options.
_ENVIRONMENT_FIELDS = ("block_start_string", "block_end_string", "variable_start_string", "variable_end_string",
                       "comment_start_string", "comment_end_string", "line_statement_prefix", "line_comment_prefix",
                       "trim_blocks", "lstrip_blocks", "newline_sequence", "keep_trailing_newline", "optimized",
                       "is_async", "sandboxed", "autoescape")


def cache_template_code(cache_dir: Path) -> bool:
    """Keep the Python code Jinja compiles from each template (the roles' manifests, conditions, task arguments) in
    ``cache_dir``, so a module run after the first parses and generates none of it again: each run's task
    workers are new processes, and compiling was about a tenth of a module run's CPU. An entry is keyed by the
    template's source, name and file name, the environment's class and options, Ansible's embedded-template switch
    and the versions of Python, Jinja and ansible-core; a directory per such version set, others removed. Any
    failure to read or write the cache compiles as Jinja does. False when the directory cannot be made."""
    import jinja2

    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    versions = f"python{python}-jinja{jinja2.__version__}-ansible{ansible_private.ansible_core_version()}"
    directory = cache_dir / hashlib.sha256(versions.encode()).hexdigest()[:16]
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for other in cache_dir.iterdir():
            if other != directory and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
    except OSError as exc:
        log.debug("no template code cache in %s: %s", cache_dir, exc)
        return False
    environment = jinja2.Environment
    if not getattr(environment.compile, "_ks_cached", False):
        environment.compile = _cached_compile(environment.compile, directory)  # type: ignore[method-assign]
        environment.compile_expression = _named_expression(environment.compile_expression)  # type: ignore
    return True


def _key(env: Any, source: str, name: str | None, filename: str | None, defer_init: bool) -> str | None:
    """The cache key of one compile, or None when it must not be cached (a debugging environment)."""
    if getattr(env, "_debuggable_template_source", False):
        return None
    embedded = None
    templating = sys.modules.get("ansible._internal._templating._jinja_bits")
    if templating is not None:
        embedded = getattr(getattr(templating, "_TemplateConfig", None), "allow_embedded_templates", None)
    options = tuple(repr(getattr(env, field, None)) for field in _ENVIRONMENT_FIELDS)
    extensions = tuple(sorted(env.extensions))
    head = repr((type(env).__module__, type(env).__qualname__, options, extensions, embedded, name, filename,
                 defer_init))
    digest = hashlib.sha256(head.encode())
    digest.update(b"\0")
    digest.update(source.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


#: The source of the expression being compiled (``{{ x }}``-less conditions, ``when:``): Jinja parses it itself and
#: hands ``compile`` the parsed tree, which has no source to key the cache on.
_expression: contextvars.ContextVar[str | None] = contextvars.ContextVar("ks_expression", default=None)


def _named_expression(compile_expression: Callable[..., Any]) -> Callable[..., Any]:
    def named(self: Any, source: str, *args: Any, **kwargs: Any) -> Any:
        token = _expression.set(f"expression\0{source}" if isinstance(source, str) else None)
        try:
            return compile_expression(self, source, *args, **kwargs)
        finally:
            _expression.reset(token)

    named.__doc__ = compile_expression.__doc__
    return named


def _cached_compile(compile_: Callable[..., Any], directory: Path) -> Callable[..., Any]:
    def cached(self: Any, source: Any, name: str | None = None, filename: str | None = None,
               raw: bool = False, defer_init: bool = False) -> Any:
        text = source if isinstance(source, str) else _expression.get()
        _expression.set(None)  # the expression's one compile
        key = None if raw or text is None else _key(self, text, name, filename, defer_init)
        if key is None:
            return compile_(self, source, name, filename, raw, defer_init)
        path = directory / key
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
            code = marshal.loads(path.read_bytes())
            if isinstance(code, CodeType):
                return code
        code = compile_(self, source, name, filename, raw, defer_init)
        _store(path, code)
        return code

    cached.__doc__ = compile_.__doc__
    cached._ks_cached = True  # type: ignore[attr-defined]
    return cached


def _store(path: Path, code: CodeType) -> None:
    """Write one entry whole or not at all (task workers of parallel runs write the same entries)."""
    with contextlib.suppress(OSError, ValueError):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                marshal.dump(code, out)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
