"""The installer's Ansible tasks (``ks_*``): one file each, which is the whole task.

A task's file holds its ``DOCUMENTATION`` (whose options are its argument spec: ``ARGUMENT_SPEC``), whether it
``SUPPORTS_CHECK_MODE``, ``run(params)`` (the task's result, or :class:`TaskFailed`), ``preview(args, api, recorded)``
for ``plan --objects`` and, where a render needs an answer other than none, ``render(params, host, waits)``. Ansible
loads the same file as the task's action plugin (this directory is ``ANSIBLE_ACTION_PLUGINS``): the file's
``__getattr__ = task_plugin(__name__)`` gives it ``ActionModule`` (``_action.TaskAction``), which runs the task in
Ansible's worker process, or records the call in a render (``_record``). Files whose names start with ``_`` are
not tasks.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType
from typing import Any

WARNINGS_KEY = "ks_warnings"
"""A task result's list of things the user should know although the task succeeded (the engine logs each as a
warning naming the module)."""


class TaskFailed(Exception):
    """The task fails with ``msg``; ``result`` is what it did before (returned beside the message)."""

    def __init__(self, msg: str, **result: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.result = result


def task_names() -> list[str]:
    """The names of the installer's tasks (the ``ks_*`` files of this package)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ks_"))


def task(name: str) -> ModuleType:
    """The module of task ``name``."""
    return importlib.import_module(f"{__name__}.{name}")


@functools.cache
def generators() -> tuple[str, ...]:
    """The tasks that write generated credentials (those with ``generated(params)``, the Secrets they make or keep):
    a render shows their Secrets as ``(generated)``, never a value."""
    return tuple(name for name in task_names() if hasattr(task(name), "generated"))


#: The keys of a documented option that are its argument spec (``ansible.module_utils.common.arg_spec``).
_SPEC_KEYS = ("type", "required", "default", "elements", "choices", "no_log", "aliases")


def argument_spec(documentation: str) -> dict[str, Any]:
    """The argument spec of a task from its ``DOCUMENTATION`` (each option's type, default, ... without its text)."""
    from installer import yaml_c

    options = (yaml_c.load(documentation) or {}).get("options") or {}
    return {name: {key: option[key] for key in _SPEC_KEYS if key in option} for name, option in options.items()}


def task_plugin(module_name: str) -> Callable[[str], Any]:
    """A task file's module ``__getattr__``: ``ActionModule``, the action plugin that runs the task, for Ansible,
    which loads the file as a plugin of its own (its copy of the file delegates to the installer's)."""
    name = module_name.rpartition(".")[2]

    def attribute(attr: str) -> Any:
        if attr != "ActionModule":
            raise AttributeError(f"module {module_name!r} has no attribute {attr!r}")
        from installer.ansible_tasks._action import action_module

        return action_module(name)

    return attribute


# --- Previews: what a task would do, for ``plan --objects`` (each task's ``preview(args, api, recorded)``) ---------


def preview_params(spec: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """A recorded call's arguments as ``run`` receives them: the spec's defaults filled in, booleans parsed."""
    from ansible.module_utils.parsing.convert_bool import boolean

    out = {key: opts.get("default") if args.get(key) is None else args[key] for key, opts in spec.items()}
    for key, opts in spec.items():
        if opts.get("type") == "bool" and out[key] is not None:
            out[key] = boolean(out[key])
    return out


def generated_secret(api: Any, module: str, namespace: str, name: str, keys: list[str],
                     fields: Callable[[dict[str, Any]], list[str]] | None = None,
                     found: Callable[[str, str], list[Any]] | None = None) -> list[Any]:
    """The change a generator task makes to the Secret holding its generated ``keys``
    (``installer.objects.results.Change``): created (offline: always, with its manifest), or, when it exists,
    ``fields(live)`` (default: the keys it lacks) and the module's label when missing (taken over when the original
    installer made it); ``found(action, note)`` replaces both for a task that decides by other means."""
    from kubernetes import client

    from installer.ansible_tasks._record import GENERATED
    from installer.objects.field_takeover import legacy_entries
    from installer.objects.results import Change
    from installer.settings import MANAGED_BY, MODULE_LABEL

    ref = f"Secret/{namespace}/{name}"
    created = Change(ref, "create", note=f"keys {', '.join(keys)}: {GENERATED}")
    if api is None:
        created.body = {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": name, "namespace": namespace, "labels": {**MANAGED_BY, MODULE_LABEL: module}},
            "stringData": dict.fromkeys(keys, GENERATED)}
        return [created]
    try:
        live = client.CoreV1Api(api).read_namespaced_secret(name, namespace)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        return [created]
    labels = live.metadata.labels or {}
    meta = api.sanitize_for_serialization(live.metadata)
    legacy = [] if MODULE_LABEL in labels else sorted({e["manager"] for e in legacy_entries(meta)})
    action, note = ("adopt", f"made by {', '.join(legacy)}: taken over, its values kept") if legacy else ("update", "")
    if found is not None:
        return found(action, note)
    data = live.data or {}
    changed = (fields(api.sanitize_for_serialization(live)) if fields is not None
               else [f"data.{k}: added {GENERATED}" for k in keys if k not in data])
    if labels.get(MODULE_LABEL) != module:
        changed.append(f"metadata.labels.{MODULE_LABEL}: + {module}")
    return [Change(ref, action, changed, note=note)] if changed else []
