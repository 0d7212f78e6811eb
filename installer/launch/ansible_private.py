"""Every private name of ansible-core the installer uses outside its patches (installer.launch.ansible_patches), each
behind a small function that checks the running release first.

They were written for ansible-core :data:`WRITTEN_FOR` (the version ``pyproject.toml`` pins). On another release the
ones a ``ks_*`` task needs refuse with :class:`UnsupportedRelease`, which names both versions and this file: the
task fails with that message instead of misbehaving; the ``ks_template`` lookup's shortcut falls back to the
built-in lookup's own code. Ansible is imported only inside the functions: the fork server imports this file before a
run's environment is known.
"""

from __future__ import annotations

import contextlib
import functools
from collections import ChainMap
from collections.abc import Iterator
from typing import Any, TypeVar

#: The ansible-core release whose private names this file and installer.launch.ansible_patches use.
WRITTEN_FOR = "2.19.14"

T = TypeVar("T", bound=type)


class UnsupportedRelease(RuntimeError):
    """A private name is used on a release it was not written for."""


@functools.cache
def ansible_core_version() -> str:
    """The version of the ansible-core the process imports (``ansible.release``: no configuration is read)."""
    from ansible.release import __version__

    return str(__version__)


def written_for() -> bool:
    """Whether the running ansible-core is the release the private names were written for."""
    return ansible_core_version() == WRITTEN_FOR


def require(use: str) -> None:
    """Raise :class:`UnsupportedRelease` for ``use`` unless the running ansible-core is :data:`WRITTEN_FOR`."""
    if not written_for():
        raise UnsupportedRelease(f"{use} relies on private names of ansible-core {WRITTEN_FOR}, and ansible-core "
                                 f"{ansible_core_version()} is installed: review installer/launch/ansible_private.py "
                                 "for that release")


# --- The ks_* tasks' action plugin (installer.ansible_tasks._action) ------------------------------------------------


def local_action(cls: T) -> T:
    """``cls`` (an ``ActionBase`` subclass) as an action that needs no connection (``_requires_connection``) and
    decides about check mode itself (``_supports_check_mode``): class attributes ``ActionBase.run`` reads (ansible-core
    2.19). They are set on any release: the functions below, which every run calls, refuse another one."""
    cls._requires_connection = False  # type: ignore[attr-defined]
    cls._supports_check_mode = True  # type: ignore[attr-defined]
    return cls


def task_of(action: Any) -> Any:
    """The ``Task`` an action plugin runs (``ActionBase._task``: its ``args``, ``until``, ``check_mode``, ``action``;
    ansible-core 2.19)."""
    require("the ks_* tasks' action plugin (ActionBase._task)")
    return action._task


def plugin_name(action: Any) -> str:
    """The name Ansible loaded the action plugin under (``ActionBase._load_name``, what a module's "Unsupported
    parameters for (NAME) module" message names; ansible-core 2.19)."""
    require("the ks_* tasks' action plugin (ActionBase._load_name)")
    return str(action._load_name)


def task_environment(action: Any) -> dict[str, str]:
    """The task's templated ``environment:`` (``ActionBase._compute_environment_string(raw_environment_out)``, which
    fills the dict it is given; ansible-core 2.19)."""
    require("the ks_* tasks' action plugin (ActionBase._compute_environment_string)")
    environment: dict[str, Any] = {}
    action._compute_environment_string(environment)
    return {str(key): str(value) for key, value in environment.items()}


def no_log_values(validation: Any) -> set[str]:
    """The values of the ``no_log`` arguments an ``ArgumentSpecValidator.validate`` found (``ValidationResult.
    _no_log_values``, what ``AnsibleModule`` censors its result with; ansible-core 2.19 has no public accessor)."""
    require("the ks_* tasks' action plugin (ValidationResult._no_log_values)")
    return set(validation._no_log_values)


def as_module_failure(result: dict[str, Any]) -> None:
    """Make a failed ``result`` a module's failure, as Ansible does with a module's result ("Module failed" in the log,
    not the action's): ``ansible._internal._errors._captured.AnsibleModuleCapturedError.normalize_result_exception``
    (ansible-core 2.19), which changes ``result`` in place."""
    require("the ks_* tasks' action plugin (AnsibleModuleCapturedError)")
    from ansible._internal._errors._captured import AnsibleModuleCapturedError

    AnsibleModuleCapturedError.normalize_result_exception(result)


# --- The ks_template lookup (roles/kubesphere-defaults/lookup_plugins/ks_template.py) -----------------------------


@contextlib.contextmanager
def template_lookup_without_copy() -> Iterator[None]:
    """Meanwhile, ``ansible.builtin.template``'s lookup layers the variables it adds over the host's in a ChainMap
    instead of deep-copying all of them: its ``run`` uses the module's ``deepcopy`` name once, for that copy
    (ansible-core 2.19's ``ansible/plugins/lookup/template.py``; its comment there asks for the ChainMap). On another
    release the lookup runs unchanged (with its copy)."""
    from ansible.plugins.lookup import template as builtin

    if not written_for():
        yield
        return
    copy = builtin.deepcopy
    builtin.deepcopy = _layered
    try:
        yield
    finally:
        builtin.deepcopy = copy


def _layered(variables: Any) -> ChainMap[str, Any]:
    return ChainMap({}, variables)
