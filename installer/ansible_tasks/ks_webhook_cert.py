"""ks_webhook_cert: ensure a serving certificate Secret (a generated CA + certificate; see installer.certs)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from installer.ansible_tasks import WARNINGS_KEY, TaskFailed, generated_secret, preview_params
from installer.certs import MAX_VALIDITY, Layout, ensure_webhook_cert
from installer.credentials import Refused
from installer.kube import api_client
from installer.manifests import Ref, record_generated

ARGUMENT_SPEC: dict[str, Any] = {
    "module": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "service": {"type": "str", "required": True},
    "renew_before_days": {"type": "int", "default": 30},
    "secret": {"type": "str", "default": "ks-controller-manager-webhook-cert"},
    "ca_name": {"type": "str", "default": "ks-controller-manager-ca"},
    "cert_name": {"type": "str", "default": "ks-core-admission-webhook"},
    "keys": {"type": "list", "elements": "str", "default": ["ca.crt", "tls.crt", "tls.key"], "no_log": False},
    "type": {"type": "str", "default": "Opaque"},
    "max_validity_days": {"type": "int", "default": MAX_VALIDITY.days},
}
SUPPORTS_CHECK_MODE = False


def generated(p: dict[str, Any]) -> list[Ref]:
    """The object :func:`run` makes or keeps (it joins the module's inventory)."""
    return [("v1", "Secret", p["namespace"] or "", p["secret"])]


def run(p: dict[str, Any]) -> dict[str, Any]:
    if len(p["keys"]) != 3:
        raise TaskFailed("keys: name the CA certificate, the certificate and the key (three keys)")
    try:
        outcome = ensure_webhook_cert(api_client(), p["namespace"], p["module"], p["service"],
                                      dt.timedelta(days=p["renew_before_days"]), layout(p))
    except Refused as exc:  # names the Secret and the rule, never a key
        raise TaskFailed(str(exc)) from exc
    except Exception as exc:  # API errors become a task failure; their text holds no key material
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    record_generated(generated(p))
    return {"changed": outcome.changed, "reason": outcome.reason, "ca_bundle": outcome.ca_bundle,
            WARNINGS_KEY: [outcome.note] if outcome.note else []}


def layout(p: dict[str, Any]) -> Layout:
    """The certificate's :class:`Layout` from the task's arguments."""
    return Layout(p["secret"], p["ca_name"], p["cert_name"], tuple(p["keys"]), p["type"],
                  dt.timedelta(days=p["max_validity_days"]))


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """What :func:`run` would change (``installer.manifests.Change``; ``api`` None: offline, what it writes): the
    Secret created; when it exists, the render's answer (``recorded``, its ``reason``) says whether the certificate
    is generated again or only labelled."""
    from installer.manifests import Change
    from installer.render_plugins import GENERATED
    from installer.settings import MODULE_LABEL

    p = preview_params(ARGUMENT_SPEC, args)
    ref = f"Secret/{p['namespace']}/{p['secret']}"
    label = f"metadata.labels.{MODULE_LABEL}: + {p['module']}"
    reason = (recorded or {}).get("reason", "kept")

    def found(action: str, note: str) -> list[Any]:
        if reason not in ("kept", "labelled"):
            return [Change(ref, "update", [f"data.{k}: changed {GENERATED}" for k in p["keys"]], note=reason)]
        return [Change(ref, action, [label], note=note)] if reason == "labelled" else []

    return generated_secret(api, p["module"], p["namespace"] or "", p["secret"], list(p["keys"]), found=found)
