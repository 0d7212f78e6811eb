"""ks_random_secret: ensure a Secret holds a key, generating a random value only if missing
(installer.random_secret)."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import TaskFailed, generated_secret, preview_params
from installer.credentials import Refused
from installer.kube import api_client
from installer.manifests import Ref, record_generated
from installer.random_secret import ensure_random_secret, planned_secret

ARGUMENT_SPEC: dict[str, Any] = {
    "module": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "name": {"type": "str", "required": True},
    "key": {"type": "str", "required": True, "no_log": False},
    "length": {"type": "int", "default": 15},
}
SUPPORTS_CHECK_MODE = False


def generated(p: dict[str, Any]) -> list[Ref]:
    """The object :func:`run` makes or keeps (it joins the module's inventory)."""
    return [("v1", "Secret", p["namespace"] or "", p["name"])]


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        outcome = ensure_random_secret(api_client(), p["namespace"], p["name"], p["key"], p["module"], p["length"])
    except Refused as exc:  # names the Secret and the rule, never the value
        raise TaskFailed(str(exc)) from exc
    except Exception as exc:  # API errors become a task failure; their text holds no secret values
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    record_generated(generated(p))
    return {"changed": outcome.changed, "created": outcome.created, "added_keys": outcome.added_keys}


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """What :func:`run` would change (``installer.manifests.Change``; ``api`` None: offline, what it writes): the
    Secret created, or the key the run's own decision (``random_secret.planned_secret``) adds and the module's label
    set; a found Secret the run refuses is an error. A value is never shown."""
    from installer.manifests import Change
    from installer.render_plugins import GENERATED

    p = preview_params(ARGUMENT_SPEC, args)
    namespace, name, key = p["namespace"] or "", p["name"], str(p["key"])

    def fields(live: dict[str, Any]) -> list[str]:
        outcome, _ = planned_secret(live, namespace, name, key, p["module"], p["length"])
        return [f"data.{k}: added {GENERATED}" for k in outcome.added_keys]

    try:
        return generated_secret(api, p["module"], namespace, name, [key], fields)
    except Refused as exc:  # the run fails the same way; the message names the Secret and the rule, no value
        return [Change(f"Secret/{namespace}/{name}", "error", note=str(exc))]
