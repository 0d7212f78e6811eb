"""ks_webhook_cert: ensure a serving certificate Secret (a generated CA + certificate; see installer.objects.certs)."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from installer.ansible_tasks import (
    WARNINGS_KEY,
    TaskFailed,
    argument_spec,
    generated_secret,
    preview_params,
    task_plugin,
)
from installer.objects.certs import MAX_VALIDITY, Layout, ensure_webhook_cert
from installer.objects.credentials import Refused
from installer.objects.inventory import object_key, read_recorded_facts
from installer.objects.kube import api_client
from installer.objects.refs import Ref
from installer.objects.results import ApplyResult

DOCUMENTATION = r"""
module: ks_webhook_cert
short_description: Create, keep or renew a certificate Secret; returns only the CA certificate.
options:
  module: {description: Installer module that owns the Secret (label value)., type: str, required: true}
  namespace: {description: Namespace of the Secret and of the webhook Service., type: str, required: true}
  service: {description: Name of the webhook Service the certificate is for., type: str, required: true}
  renew_before_days: {description: Renew when a certificate expires within this many days., type: int, default: 30}
  secret: {description: The Secret's name (a module's certificates are the registry's Module.certificates).,
           type: str, required: true}
  ca_name: {description: The CA's common name., type: str, required: true}
  cert_name: {description: The certificate's common name., type: str, required: true}
  keys:
    description: The Secret's keys for the CA certificate, the certificate and its private key, in that order.
    type: list
    elements: str
    default: [ca.crt, tls.crt, tls.key]
    no_log: false
  type: {description: The Secret's type when it is created., type: str, default: Opaque}
  annotations:
    description: Annotations the Secret carries (its policy, e.g. installer.kubesphere.io/prune=disabled), a found one
      too.
    type: dict
    default: {}
  max_validity_days:
    description: The longest validity a found certificate may have to be kept (days); default - upstream's 3650 and a
      day of slack (installer.objects.certs.MAX_VALIDITY).
    type: int
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = False


def generated(p: dict[str, Any]) -> list[Ref]:
    """The object :func:`run` makes or keeps (it joins the module's inventory)."""
    return [("v1", "Secret", p["namespace"] or "", p["secret"])]


def run(p: dict[str, Any]) -> dict[str, Any]:
    if len(p["keys"]) != 3:
        raise TaskFailed("keys: name the CA certificate, the certificate and the key (three keys)")
    ref = generated(p)[0]
    try:
        outcome = ensure_webhook_cert(api_client(), p["namespace"], p["module"], p["service"], layout=layout(p),
                                      renew_before=dt.timedelta(days=p["renew_before_days"]),
                                      recorded=recorded_fingerprint(ref))
    except Refused as exc:  # names the Secret and the rule, never a key
        raise TaskFailed(str(exc)) from exc
    except Exception as exc:  # API errors become a task failure; their text holds no key material
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    ApplyResult(applied_refs=[ref], facts={object_key(ref): outcome.facts} if outcome.facts else {}).record()
    return {"changed": outcome.changed, "reason": outcome.reason, "ca_bundle": outcome.ca_bundle,
            WARNINGS_KEY: [outcome.note] if outcome.note else []}


def recorded_fingerprint(ref: Ref) -> str | None:
    """The certificate the module's record names for the Secret (installer.objects.certs.fingerprint), if any."""
    known = read_recorded_facts().get(object_key(ref)) or []
    return known[2] if len(known) > 2 else None


def layout(p: dict[str, Any]) -> Layout:
    """The certificate's :class:`Layout` from the task's arguments."""
    return Layout(p["secret"], p["ca_name"], p["cert_name"], tuple(p["keys"]), p["type"],
                  dt.timedelta(days=p["max_validity_days"]) if p["max_validity_days"] else MAX_VALIDITY,
                  tuple(sorted((str(k), str(v)) for k, v in (p["annotations"] or {}).items())))


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """What :func:`run` would change (``installer.objects.results.Change``; ``api`` None: offline, what it writes):
    the Secret created; when it exists, the render's answer (``recorded``, its ``reason``) says whether the certificate
    is generated again or only labelled."""
    from installer.ansible_tasks._record import GENERATED
    from installer.objects.results import Change
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


def _live(args: dict[str, Any]) -> dict[str, Any]:
    """What ensure_webhook_cert would do, read-only: ``reason`` (``kept`` or why it would write) and the bundle."""
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import NotFoundError

    from installer.ansible_tasks._record import GENERATED_CA
    from installer.objects.certs import judge, trusted_bundle
    from installer.objects.kube import api_client
    from installer.settings import MANAGED_BY, MODULE_LABEL

    cert_layout = layout(args)
    secrets = DynamicClient(api_client()).resources.get(api_version="v1", kind="Secret")
    try:
        live = secrets.get(name=cert_layout.secret, namespace=args["namespace"]).to_dict()
    except NotFoundError:
        return {"reason": "missing", "ca_bundle": GENERATED_CA}
    ref = ("v1", "Secret", args["namespace"] or "", cert_layout.secret)
    reason = judge(live, cert_layout, args["service"], args["namespace"], recorded=recorded_fingerprint(ref))
    if reason is not None:
        return {"reason": reason, "ca_bundle": GENERATED_CA}
    labels = (live.get("metadata") or {}).get("labels") or {}
    wanted = {**MANAGED_BY, MODULE_LABEL: args["module"]}
    current = cert_layout.from_secret(live.get("data") or {})
    bundle = trusted_bundle(api_client(), args["namespace"], args["service"], current)
    return {"reason": "kept" if wanted.items() <= labels.items() else "labelled",
            "ca_bundle": base64.b64encode(bundle).decode()}


def render(params: dict[str, Any], host: str, waits: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """In a render: the CA bundle of the certificate the cluster holds when the installer would keep it, else (and
    offline) a placeholder: a new one is generated."""
    from installer.ansible_tasks._record import GENERATED_CA, plain, world

    if world() is not None:
        return {"reason": "kept", "ca_bundle": GENERATED_CA}, None
    args = {key: spec.get("default") for key, spec in ARGUMENT_SPEC.items()} | plain(params)
    try:
        outcome = _live(args)
    except Exception as exc:  # API errors: the task fails with their text, as the real one would
        return {"failed": True, "msg": f"{type(exc).__name__}: {exc}"}, None
    return outcome, {"reason": outcome["reason"]}
