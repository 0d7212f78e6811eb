"""ks_webhook_cert in a render (see installer.render_plugins): recorded; answers with the CA bundle of the certificate
the cluster holds when the installer would keep it, else (and offline) with a placeholder: a new one is generated."""

from __future__ import annotations

import base64
from typing import Any

from installer.render_plugins import GENERATED_CA
from installer.render_plugins._recorder import Recorder, plain, world


def _live(args: dict[str, Any]) -> dict[str, Any]:
    """What ensure_webhook_cert would do, read-only: ``reason`` (``kept`` or why it would write) and the bundle."""
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import NotFoundError

    from installer.ansible_tasks.ks_webhook_cert import layout as task_layout
    from installer.certs import judge, trusted_bundle
    from installer.kube import api_client
    from installer.settings import MANAGED_BY, MODULE_LABEL

    layout = task_layout(args)
    secrets = DynamicClient(api_client()).resources.get(api_version="v1", kind="Secret")
    try:
        live = secrets.get(name=layout.secret, namespace=args["namespace"]).to_dict()
    except NotFoundError:
        return {"reason": "missing", "ca_bundle": GENERATED_CA}
    reason = judge(live, layout, args["service"], args["namespace"])
    if reason is not None:
        return {"reason": reason, "ca_bundle": GENERATED_CA}
    labels = (live.get("metadata") or {}).get("labels") or {}
    wanted = {**MANAGED_BY, MODULE_LABEL: args["module"]}
    current = layout.from_secret(live.get("data") or {})
    bundle = trusted_bundle(api_client(), args["namespace"], args["service"], current)
    return {"reason": "kept" if wanted.items() <= labels.items() else "labelled",
            "ca_bundle": base64.b64encode(bundle).decode()}


class ActionModule(Recorder):
    NAME = "ks_webhook_cert"

    def answer(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        if world() is not None:
            return {"reason": "kept", "ca_bundle": GENERATED_CA}, None
        from installer.ansible_tasks import ks_webhook_cert

        args = {key: spec.get("default") for key, spec in ks_webhook_cert.ARGUMENT_SPEC.items()} | plain(params)
        try:
            outcome = _live(args)
        except Exception as exc:  # API errors: the task fails with their text, as the real one would
            return {"failed": True, "msg": f"{type(exc).__name__}: {exc}"}, None
        return outcome, {"reason": outcome["reason"]}
