"""The recorder every plugin of this directory runs (see installer.render_plugins)."""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

from ansible.plugins.action import ActionBase

from installer.render_plugins import CAPTURE_ENV, GENERATED_CA, WORLD_ENV


def world() -> dict[str, list[dict[str, Any]]] | None:
    """The offline world, or None when the render reads the cluster."""
    text = os.environ.get(WORLD_ENV)
    return json.loads(text) if text else None


def _generated_file(host: str) -> str:
    return os.path.join(os.environ[CAPTURE_ENV], host + ".generated.json")


def note_generated(host: str, namespace: str, name: str, keys: list[str]) -> None:
    """A generator of this run ensured Secret ``namespace/name`` with ``keys``: later reads of the run see it."""
    path = _generated_file(host)
    known = json.loads(open(path, encoding="utf-8").read()) if os.path.exists(path) else []  # noqa: SIM115
    known.append({"namespace": namespace, "name": name, "keys": keys})
    with open(path, "w", encoding="utf-8") as out:
        json.dump(known, out)


def with_generated(host: str, params: dict[str, Any], resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``resources`` of a read, with the Secrets this run's generators ensured before it (their keys as
    ``(generated)``, base64 as a Secret holds them) where the cluster does not have them (yet)."""
    path = _generated_file(host)
    if params.get("kind") != "Secret" or not os.path.exists(path):
        return resources
    out = [json.loads(json.dumps(r)) for r in resources]
    for entry in json.loads(open(path, encoding="utf-8").read()):  # noqa: SIM115
        if params.get("name") not in (None, entry["name"]) or params.get("namespace") not in (None,
                                                                                              entry["namespace"]):
            continue
        found = next((r for r in out if r["metadata"]["name"] == entry["name"]
                      and r["metadata"].get("namespace") == entry["namespace"]), None)
        if found is None:
            found = {"metadata": {"name": entry["name"], "namespace": entry["namespace"]}, "data": {}}
            out.append(found)
        data = found.setdefault("data", {}) or {}
        found["data"] = {**dict.fromkeys(entry["keys"], GENERATED_CA), **data}
    return out


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
        self.host = (task_vars or {})["inventory_hostname"]
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
