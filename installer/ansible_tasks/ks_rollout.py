"""ks_rollout: roll Deployments by a pod-template annotation (see installer.rollout)."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import TaskFailed
from installer.kube import api_client
from installer.rollout import roll

ARGUMENT_SPEC: dict[str, Any] = {
    "namespace": {"type": "str", "required": True},
    "deployments": {"type": "list", "elements": "str", "required": True},
    "value": {"type": "str", "required": True},
    "wait": {"type": "bool", "default": True},
    "keep_unstamped": {"type": "bool", "default": False},
    "wait_timeout": {"type": "int", "default": 600},
}
SUPPORTS_CHECK_MODE = False


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        rolled, missing = roll(api_client(), p["namespace"], p["deployments"], p["value"],
                               wait=p["wait"], timeout=p["wait_timeout"],
                               keep_unstamped=p["keep_unstamped"])
    except Exception as exc:  # API errors and timeouts become a task failure with their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    return {"changed": bool(rolled), "rolled": rolled, "missing": missing}
