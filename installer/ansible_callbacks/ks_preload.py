"""Callback plugin ks_preload: loads the ks_* tasks' code in ansible-playbook's main process before it forks its
workers (installer.ansible_tasks._preload); it handles no event."""

from __future__ import annotations

from ansible.plugins.callback import CallbackBase

from installer.ansible_tasks._preload import preload

DOCUMENTATION = r"""
name: ks_preload
type: aggregate
short_description: Load the installer's task code once, before Ansible forks its workers.
description:
  - Imports kubernetes and the ks_* tasks' code and loads the kubeconfig in the main process, so the ks_* action
    plugins' workers start with them; makes each worker end when the main process ends.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ks_preload"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self) -> None:
        super().__init__()
        preload()
