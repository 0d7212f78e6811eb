"""ks_random_secret: ensure a Secret holds a key, generating a random value only if missing
(installer.random_secret)."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import TaskFailed, generated_secret, preview_params
from installer.credentials import Refused
from installer.kube import api_client
from installer.manifests import record_generated
from installer.random_secret import ensure_random_secret

ARGUMENT_SPEC: dict[str, Any] = {
    "module": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "name": {"type": "str", "required": True},
    "key": {"type": "str", "required": True, "no_log": False},
    "length": {"type": "int", "default": 15},
}
SUPPORTS_CHECK_MODE = False


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        outcome = ensure_random_secret(api_client(), p["namespace"], p["name"], p["key"], p["module"], p["length"])
    except Refused as exc:  # names the Secret and the rule, never the value
        raise TaskFailed(str(exc)) from exc
    except Exception as exc:  # API errors become a task failure; their text holds no secret values
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    record_generated([("v1", "Secret", p["namespace"], p["name"])])
    return {"changed": outcome.changed, "created": outcome.created, "added_keys": outcome.added_keys}


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """What :func:`run` would change (``installer.manifests.Change``; ``api`` None: offline, what it writes): the
    Secret created, or the key added and the module's label set; a value is never shown."""
    p = preview_params(ARGUMENT_SPEC, args)
    return generated_secret(api, p["module"], p["namespace"] or "", p["name"], [str(p["key"])])
