"""What ansible-playbook's main process does once, before it forks a worker per task (the ``ks_preload`` callback).

- Import the ``ks_*`` tasks' code (kubernetes, the engine's modules, the action plugins' base), so every worker has
  it already, and give each task's module the name Ansible's plugin loader gives the task's action plugin
  (``ansible.plugins.action.<task>``): the loader then finds it loaded and no worker executes the file again.
- Load the Jinja filter and test plugins once (Ansible loads them, every file of them, in each worker that renders
  a template with a filter or test; a worker now inherits them loaded).
- Load the kubeconfig once: the certificate files kubernetes writes for it are then the main process's (removed
  when it exits), and the workers reuse them. No API client or connection is made here.
- Give each worker SIGTERM when the main process dies (ansible-runner's cancel and timeout SIGKILL its process
  group, which the workers, each in a session of its own, are not in): a worker's SIGTERM handler ends it and its
  own children, so no task goes on working for a cancelled run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

from installer.ansible_tasks import task, task_names
from installer.objects.kube import ApiUnavailable, api_client

PR_SET_PDEATHSIG = 1
_forking_parent = [0]
_done = [False]


#: The package of the Python modules Ansible's plugin loader makes of the action plugins it finds in a directory.
ACTION_PLUGINS_PACKAGE = "ansible.plugins.action"


def import_tasks(base: bool = True) -> list[str]:
    """Import every task module and, with ``base``, the action plugins' base (which imports Ansible) and the task
    modules under their action plugins' names; the tasks' names."""
    names = task_names()
    for name in ["_action", *names] if base else names:
        module = task(name)
        if base and name != "_action":
            sys.modules.setdefault(f"{ACTION_PLUGINS_PACKAGE}.{name}", module)
    return names


def load_jinja_plugins() -> None:
    """Every filter and test plugin, loaded into Ansible's plugin loaders (as a worker's first template does)."""
    from ansible.plugins.loader import filter_loader, test_loader

    for loader in (filter_loader, test_loader):
        list(loader.all())


def load_kubeconfig() -> None:
    """The kubeconfig (or in-cluster config) loaded into kubernetes' default configuration; none is no error
    here (the task that needs the cluster reports it)."""
    with contextlib.suppress(ApiUnavailable):
        api_client()


def _remember_parent() -> None:
    _forking_parent[0] = os.getpid()


def _die_with_parent() -> None:
    """In a forked child: SIGTERM when the process that forked it ends (Linux); ends at once if it already has."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != _forking_parent[0]:
        os._exit(1)


def preload() -> None:
    if _done[0]:
        return
    _done[0] = True
    import_tasks()
    load_jinja_plugins()
    load_kubeconfig()
    os.register_at_fork(before=_remember_parent, after_in_child=_die_with_parent)
