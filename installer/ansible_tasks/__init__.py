"""The work of the installer's Ansible tasks (``ks_*``), one module per task.

Each task module holds the task's ``ARGUMENT_SPEC``, whether it ``SUPPORTS_CHECK_MODE`` and ``run(params)``, which
returns the task's result or raises :class:`TaskFailed`. Two front ends call it: the Ansible module of the same name
(``playbooks/library``, its own interpreter per task) and the action plugin of the same name
(``playbooks/action_plugins``, in Ansible's worker process, where the playbooks run it).
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
