"""The work of the installer's Ansible tasks (``ks_*``), one module per task.

Each task module holds the task's ``ARGUMENT_SPEC``, whether it ``SUPPORTS_CHECK_MODE`` and ``run(params)``, which
returns the task's result or raises :class:`TaskFailed`. Two front ends call it: the Ansible module of the same name
(``plugins/modules``, its own interpreter per task) and the action plugin of the same name
(``plugins/action``, in Ansible's worker process, where the plays run it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, Protocol

WARNINGS_KEY = "ks_warnings"
"""A task result's list of things the user should know although the task succeeded (the engine logs each as a
warning naming the module)."""


class TaskFailed(Exception):
    """The task fails with ``msg``; ``result`` is what it did before (returned beside the message)."""

    def __init__(self, msg: str, **result: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.result = result


class _Module(Protocol):
    params: dict[str, Any]

    def exit_json(self, **kwargs: Any) -> NoReturn: ...

    def fail_json(self, msg: str, **kwargs: Any) -> NoReturn: ...


def run_module(module: _Module, run: Callable[[dict[str, Any]], dict[str, Any]]) -> NoReturn:
    """Run a task as an Ansible module: ``run(module.params)`` and exit with its result or failure."""
    try:
        result = run(module.params)
    except TaskFailed as exc:
        module.fail_json(msg=exc.msg, **exc.result)
    module.exit_json(**result)


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
    """The change a generator task makes to the Secret holding its generated ``keys`` (``installer.manifests.Change``):
    created (offline: always, with its manifest), or, when it exists, ``fields(live)`` (default: the keys it lacks)
    and the module's label when missing (taken over when the original installer made it); ``found(action, note)``
    replaces both for a task that decides by other means."""
    from kubernetes import client

    from installer.field_takeover import legacy_entries
    from installer.manifests import Change
    from installer.render_plugins import GENERATED
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
