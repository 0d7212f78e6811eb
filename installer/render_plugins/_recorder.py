"""The recorder every plugin of this directory runs (see installer.render_plugins)."""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

from ansible.plugins.action import ActionBase

from installer.render_plugins import CAPTURE_ENV, WORLD_ENV


def world() -> dict[str, list[dict[str, Any]]] | None:
    """The offline world, or None when the render reads the cluster."""
    text = os.environ.get(WORLD_ENV)
    return json.loads(text) if text else None


def plain(value: Any) -> Any:
    """``value`` as plain JSON data (Ansible's lazily templated containers included)."""
    return json.loads(json.dumps(value, default=str))


class Recorder(ActionBase):
    """Records the task's arguments; :meth:`answer` says what the task returns."""

    NAME: ClassVar[str]
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        params = dict(self._task.args)
        answer, note = self.answer(params)
        entry: dict[str, Any] = {"module": self.NAME, "args": params}
        if note:
            entry["result"] = note
        capture = os.path.join(os.environ[CAPTURE_ENV], (task_vars or {})["inventory_hostname"] + ".jsonl")
        with open(capture, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry, sort_keys=True, default=str) + "\n")
        result.update(answer)
        result["changed"] = False
        return result

    def answer(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """What the task returns, and what to record of it beside the arguments (None: nothing)."""
        return {}, None
