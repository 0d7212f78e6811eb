"""Test harness action ``harness_write``: writes ``content`` to ``dest`` in Ansible's own process.

``tests/role_harness.py`` runs the ``ansible.builtin.copy`` tasks (``content`` + ``dest``) of the plays it
renders with this action, so a render starts no module process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    """Write ``content`` (a dict or list as JSON, as ``copy`` does) to the local file ``dest``."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        content, dest = self._task.args["content"], self._task.args["dest"]
        text = json.dumps(content) if isinstance(content, dict | list) else str(content)
        Path(dest).write_text(text, encoding="utf-8")
        result.update(changed=True, dest=dest)
        return result
