"""The action plugin of a ``ks_*`` task: the task's work in Ansible's worker process (in a render: its call recorded,
``_record``).

It behaves as the task's module did in a process of its own: the same argument spec and messages, check mode
skipped unless the task supports it, the task's ``environment:`` in ``os.environ``, stray output dropped, and the
same result (its ``invocation``, no_log values censored, plain data after the same JSON trip).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any, ClassVar

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.json import Direction, get_module_decoder, get_module_encoder
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.errors import UnsupportedError
from ansible.plugins.action import ActionBase
from kubernetes.config import kube_config

from installer.ansible_tasks import TaskFailed, task
from installer.ansible_tasks._record import record, recording
from installer.launch import ansible_private, kubernetes_private

#: The serialization profile of the installer's (old-style Python) modules.
PROFILE = "legacy"


def module_json(value: Any, direction: Direction) -> Any:
    """``value`` as it arrives after the JSON trip between controller and module (plain data)."""
    text = json.dumps(value, cls=get_module_encoder(PROFILE, direction))
    return json.loads(text, cls=get_module_decoder(PROFILE, direction))


def _kubeconfig_path() -> str:
    return os.environ.get("KUBECONFIG", "~/.kube/config")


@contextlib.contextmanager
def task_environment(env: dict[str, str]) -> Iterator[None]:
    """``env`` in ``os.environ`` meanwhile, ``$KUBECONFIG`` included (kubernetes reads it only when imported)."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = _kubeconfig_path()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = _kubeconfig_path()


@contextlib.contextmanager
def kube_temp_files() -> Iterator[None]:
    """Remove the certificate files a kubeconfig load writes meanwhile (a module's exit did; a worker's does not)."""
    files = kubernetes_private.kubeconfig_temp_files()
    before = set(files)
    try:
        yield
    finally:
        for key in set(files) - before:
            with contextlib.suppress(OSError):
                os.remove(files.pop(key))


def censored(result: dict[str, Any], no_log_values: set[str]) -> dict[str, Any]:
    """``result`` without the values of no_log arguments, as AnsibleModule returns it."""
    if not no_log_values:
        return result
    kept = {key: value for key, value in result.items() if value is None or isinstance(value, bool)}
    return {**remove_values(result, no_log_values), **kept}


@ansible_private.local_action  # check mode: decided below, after the arguments are validated, with the module's message
class TaskAction(ActionBase):
    """Runs ``task.run`` (an ``installer.ansible_tasks`` module) with the task's validated arguments."""

    task: ClassVar[ModuleType]
    TRANSFERS_FILES = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        super().run(tmp, task_vars)
        play_task = ansible_private.task_of(self)
        if recording():
            return record(self.task, dict(play_task.args), (task_vars or {})["inventory_hostname"],
                          bool(play_task.until))
        # As a module gets them: plain data after the JSON trip (one walk over Ansible's lazily templated values,
        # not a deep copy of them and then a walk), validated and coerced by the module's argument spec.
        args = module_json(dict(play_task.args), Direction.CONTROLLER_TO_MODULE)
        validation = ArgumentSpecValidator(self.task.ARGUMENT_SPEC).validate(args)
        args |= validation.validated_parameters
        result: dict[str, Any]
        if validation.errors.errors:
            msg = validation.errors.msg
            if isinstance(validation.errors[0], UnsupportedError):
                msg = f"Unsupported parameters for ({ansible_private.plugin_name(self)}) module: {msg}"
            result = {"failed": True, "msg": msg}
        elif play_task.check_mode and not self.task.SUPPORTS_CHECK_MODE:
            result = {"skipped": True, "msg": f"remote module ({play_task.action}) does not support check mode"}
        else:
            result = self._run_task(args)
        result.setdefault("invocation", {"module_args": args})
        censored_result = censored(result, ansible_private.no_log_values(validation))
        result = module_json(censored_result, Direction.MODULE_TO_CONTROLLER)
        # As for a module's result: a failure is the module's ("Module failed" in the log), not the action's.
        ansible_private.as_module_failure(result)
        return result

    def _run_task(self, params: dict[str, Any]) -> dict[str, Any]:
        env = ansible_private.task_environment(self)
        with (task_environment(env), kube_temp_files(), contextlib.redirect_stdout(io.StringIO()),
              contextlib.redirect_stderr(io.StringIO())):
            try:
                return self.task.run(params)
            except TaskFailed as exc:
                return {**exc.result, "failed": True, "msg": exc.msg}


@functools.cache
def action_module(name: str) -> type[TaskAction]:
    """The action plugin class of task ``name`` (``installer.ansible_tasks.<name>``)."""
    module = task(name)
    return type("ActionModule", (TaskAction,), {"task": module, "__module__": module.__name__})
