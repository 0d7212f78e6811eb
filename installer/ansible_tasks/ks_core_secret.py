"""ks_core_secret: create or complete Secret kubesphere-secret and the admin User (see installer.core_secret)."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import WARNINGS_KEY, TaskFailed
from installer.core_secret import ADMIN, SECRET_NAME, USER_API, ensure_core_secret
from installer.credentials import Refused
from installer.kube import api_client
from installer.manifests import record_generated

ARGUMENT_SPEC: dict[str, Any] = {
    "module": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "jwt_secret": {"type": "str", "default": "", "no_log": True},
    "admin_password": {"type": "str", "no_log": True},
}
SUPPORTS_CHECK_MODE = False


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        outcome = ensure_core_secret(api_client(), p["namespace"], p["module"], p["jwt_secret"] or "",
                                     p["admin_password"])
    except Refused as exc:  # names the Secret and the rule, never the value
        raise TaskFailed(str(exc)) from exc
    except Exception as exc:  # API errors become a task failure; their text holds no secret values
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    record_generated([("v1", "Secret", p["namespace"], SECRET_NAME), (USER_API, "User", "", ADMIN)])
    return {"changed": outcome.changed, "created": outcome.created, "changed_keys": outcome.changed_keys,
            WARNINGS_KEY: outcome.notes}
