"""ks_random_secret: ensure a Secret holds a key, generating a random value only if missing
(installer.objects.random_secret)."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import TaskFailed, argument_spec, generated_secret, preview_params, task_plugin
from installer.objects.credentials import Refused
from installer.objects.inventory import record_generated
from installer.objects.kube import api_client
from installer.objects.random_secret import ensure_random_secret, planned_secret
from installer.objects.refs import Ref

DOCUMENTATION = r"""
module: ks_random_secret
short_description: Ensure Secret <name> has key <key>; a random value is generated only when it is missing and
  never replaced; no value is returned.
options:
  module: {description: Installer module that owns the Secret (label value)., type: str, required: true}
  namespace: {description: Namespace of the Secret., type: str, required: true}
  name: {description: Name of the Secret., type: str, required: true}
  key: {description: Data key that must hold the generated value., type: str, required: true, no_log: false}
  length: {description: Length of a generated value (ASCII letters)., type: int, default: 15}
  annotations:
    description: Annotations the Secret carries (its policy, e.g. installer.kubesphere.io/prune=disabled), a found one
      too.
    type: dict
    default: {}
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = False


def generated(p: dict[str, Any]) -> list[Ref]:
    """The object :func:`run` makes or keeps (it joins the module's inventory)."""
    return [("v1", "Secret", p["namespace"] or "", p["name"])]


def _annotations(p: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (p["annotations"] or {}).items()}


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        outcome = ensure_random_secret(api_client(), p["namespace"], p["name"], p["key"], p["module"], p["length"],
                                       _annotations(p))
    except Refused as exc:  # names the Secret and the rule, never the value
        raise TaskFailed(str(exc)) from exc
    except Exception as exc:  # API errors become a task failure; their text holds no secret values
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    record_generated(generated(p))
    return {"changed": outcome.changed, "created": outcome.created, "added_keys": outcome.added_keys}


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """What :func:`run` would change (``installer.objects.results.Change``; ``api`` None: offline, what it writes):
    the Secret created, or the key the run's own decision (``random_secret.planned_secret``) adds and the module's label
    set; a found Secret the run refuses is an error. A value is never shown."""
    from installer.ansible_tasks._record import GENERATED
    from installer.objects.results import Change

    p = preview_params(ARGUMENT_SPEC, args)
    namespace, name, key = p["namespace"] or "", p["name"], str(p["key"])

    def fields(live: dict[str, Any]) -> list[str]:
        outcome, _ = planned_secret(live, namespace, name, key, p["module"], p["length"], _annotations(p))
        return [f"data.{k}: added {GENERATED}" for k in outcome.added_keys]

    try:
        return generated_secret(api, p["module"], namespace, name, [key], fields)
    except Refused as exc:  # the run fails the same way; the message names the Secret and the rule, no value
        return [Change(f"Secret/{namespace}/{name}", "error", note=str(exc))]


def render(params: dict[str, Any], host: str, waits: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """In a render: nothing written; later reads of the run see the Secret."""
    from installer.ansible_tasks._record import note_generated, plain

    args = plain(params)
    note_generated(host, args["namespace"], args["name"], [str(args["key"])])
    return {}, None
