"""A task in a render (:mod:`installer.preview.render`): its call is appended to ``$KS_CAPTURE_DIR/<host>.jsonl``
instead of touching the cluster, and it answers as a cluster would (the task's ``render``, or nothing). The read-only
``ks_info`` reads the cluster in ``$KUBECONFIG`` or, with ``$KS_RENDER_WORLD`` (JSON: kind -> objects), answers from
that.

Only a render sets ``KS_CAPTURE_DIR``; a module's run sets it empty (installer.engine.runner), so a run never records in
place of doing.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

CAPTURE_ENV = "KS_CAPTURE_DIR"
WORLD_ENV = "KS_RENDER_WORLD"
GENERATED = "(generated)"
"""What a render shows for a credential the installer would generate."""
#: The CA bundle a webhook certificate that would be generated gets in a render (its real value is not known yet).
GENERATED_CA = base64.b64encode(GENERATED.encode()).decode()


def recording() -> bool:
    """Whether this process renders (its tasks record their calls)."""
    return bool(os.environ.get(CAPTURE_ENV))


def world() -> dict[str, list[dict[str, Any]]] | None:
    """The offline world, or None when the render reads the cluster."""
    text = os.environ.get(WORLD_ENV)
    return json.loads(text) if text else None


def _generated_file(host: str) -> str:
    return os.path.join(os.environ[CAPTURE_ENV], host + ".generated.json")


def note_generated(host: str, namespace: str, name: str, keys: list[str]) -> None:
    """A generator of this run ensured Secret ``namespace/name`` with ``keys``: later reads of the run see it."""
    path = _generated_file(host)
    known = json.loads(Path(path).read_text(encoding="utf-8")) if os.path.exists(path) else []
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
    for entry in json.loads(Path(path).read_text(encoding="utf-8")):
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


def record(task: ModuleType, params: dict[str, Any], host: str, waits: bool) -> dict[str, Any]:
    """Record a call of ``task`` with ``params`` on ``host`` and return what the task answers in a render (its
    ``render(params, host, waits)``: the answer and what to record of it beside the arguments; none by default;
    ``waits``: the task is retried until a condition holds)."""
    name = task.__name__.rpartition(".")[2]
    render = getattr(task, "render", None)
    answer, note = render(params, host, waits) if render is not None else ({}, None)
    entry: dict[str, Any] = {"module": name, "args": params}
    if note:
        entry["result"] = note
    with open(os.path.join(os.environ[CAPTURE_ENV], host + ".jsonl"), "a", encoding="utf-8") as out:
        out.write(json.dumps(entry, sort_keys=True, default=str) + "\n")
    return {**answer, "changed": False}
