"""ks_core_secret: create or complete Secret kubesphere-secret and the admin User (see
installer.objects.core_secret)."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import (
    WARNINGS_KEY,
    TaskFailed,
    argument_spec,
    generated_secret,
    preview_params,
    task_plugin,
)
from installer.objects.core_secret import ADMIN, SECRET_NAME, USER_API, ensure_core_secret
from installer.objects.credentials import Refused
from installer.objects.inventory import record_generated
from installer.objects.kube import api_client
from installer.objects.refs import Ref

DOCUMENTATION = r"""
module: ks_core_secret
short_description: Ensure kubesphere-secret (secret, token, initAdminPassword) and the admin User; no values returned.
options:
  module: {description: Installer module that owns the objects (label value)., type: str, required: true}
  namespace: {description: Namespace of the Secret., type: str, required: true}
  jwt_secret:
    description: authentication.jwtSecret; empty keeps the current or generated key.
    type: str
    default: ''
    no_log: true
  admin_password:
    description: authentication.adminPassword; omitted means upstream's default password, empty a random one.
    type: str
    no_log: true
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = False


def generated(p: dict[str, Any]) -> list[Ref]:
    """The objects :func:`run` makes or keeps (they join the module's inventory)."""
    return [("v1", "Secret", p["namespace"] or "", SECRET_NAME), (USER_API, "User", "", ADMIN)]


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        outcome = ensure_core_secret(api_client(), p["namespace"], p["module"], p["jwt_secret"] or "",
                                     p["admin_password"])
    except Refused as exc:  # names the Secret and the rule, never the value
        raise TaskFailed(str(exc)) from exc
    except Exception as exc:  # API errors become a task failure; their text holds no secret values
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    record_generated(generated(p))
    return {"changed": outcome.changed, "created": outcome.created, "changed_keys": outcome.changed_keys,
            WARNINGS_KEY: outcome.notes}


KEYS = ["secret", "token", "initAdminPassword"]


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """What :func:`run` would change (``installer.objects.results.Change``; ``api`` None: offline, what it writes):
    ``kubesphere-secret`` created, or the keys the run's own decision (``core_secret.desired_data``) adds or changes,
    by name only; the admin User created when missing. A found value the run refuses is an error."""
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

    from installer.ansible_tasks._record import GENERATED
    from installer.objects.core_secret import desired_data
    from installer.objects.credentials import decoded
    from installer.objects.results import Change

    p = preview_params(ARGUMENT_SPEC, args)
    namespace = p["namespace"] or ""
    if api is None:
        return [*generated_secret(None, p["module"], namespace, SECRET_NAME, KEYS),
                Change(f"User/{ADMIN}", "create", note="once, its password from initAdminPassword")]
    try:
        DynamicClient(api).resources.get(api_version=USER_API, kind="User").get(name=ADMIN)
        admin_exists = True
    except (NotFoundError, ResourceNotFoundError):
        admin_exists = False

    def fields(live: dict[str, Any]) -> list[str]:
        current = decoded(namespace, SECRET_NAME, live.get("data") or {})
        wanted = desired_data(current, p["jwt_secret"] or "", p["admin_password"], admin_exists, namespace)
        return [f"data.{k}: {'changed' if k in current else f'added {GENERATED}'}"
                for k in sorted(wanted) if current.get(k) != wanted[k]]

    try:
        out = generated_secret(api, p["module"], namespace, SECRET_NAME, KEYS, fields)
    except Refused as exc:  # the run fails the same way; the message names the Secret and the rule, no value
        return [Change(f"Secret/{namespace}/{SECRET_NAME}", "error", note=str(exc))]
    if not admin_exists:
        out.append(Change(f"User/{ADMIN}", "create", note="its password from initAdminPassword"))
    return out
