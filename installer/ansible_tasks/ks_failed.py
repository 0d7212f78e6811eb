"""ks_failed: a render's record of the task that failed (installer.preview.render's rescue block); no module's play
calls it."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import TaskFailed, argument_spec, task_plugin

DOCUMENTATION = r"""
module: ks_failed
short_description: In a render, record the task that failed and its message (the render's rescue block calls it).
options:
  task: {description: Name of the task that failed., type: str, default: ''}
  msg: {description: Its message., type: str, default: ''}
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = True


def run(p: dict[str, Any]) -> dict[str, Any]:
    raise TaskFailed(f"ks_failed is a render's record, not a task of a run (task {p['task']!r} failed)")
