"""A webhook certificate replaced without a moment where its webhooks distrust what their server serves.

A webhook's server serves the key pair of the Secret it mounts and follows the Secret when it changes; the API server
calls it only when a CA in the webhook's ``caBundle`` issued what it serves. So before a new certificate is written,
every webhook its Service serves (admission webhooks, and CRD conversion webhooks) gets the new CA added to the CAs
its ``caBundle`` holds (:func:`trust_new_ca`): whichever certificate the server serves meanwhile, the old or the new,
the calls through it succeed. The module's own registration of those webhooks, later in its run, leaves the new CA
alone (the old one was the replaced certificate's: expired, weak, or with a published key).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from installer.objects.field_takeover import JSON_PATCH
from installer.settings import FIELD_MANAGER

#: The kinds whose webhooks name a Service: ``webhooks[*].clientConfig`` of the admission webhook configurations,
#: ``spec.conversion.webhook.clientConfig`` of a CRD.
KINDS = (("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
         ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
         ("apiextensions.k8s.io/v1", "CustomResourceDefinition"))
ATTEMPTS = 5


def client_configs(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each webhook client configuration of an object of :data:`KINDS`, with its JSON pointer."""
    if obj.get("kind") == "CustomResourceDefinition":
        config = (((obj.get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig")
        if config:
            yield "/spec/conversion/webhook/clientConfig", config
        return
    for i, hook in enumerate(obj.get("webhooks") or []):
        if hook.get("clientConfig"):
            yield f"/webhooks/{i}/clientConfig", hook["clientConfig"]


def bundle_with(bundle: str | None, ca_pem: bytes) -> str | None:
    """The ``caBundle`` (base64) that trusts ``ca_pem`` before the certificates ``bundle`` holds; None when it
    trusts it already. A bundle that holds no readable certificate is replaced."""
    try:
        held = x509.load_pem_x509_certificates(base64.b64decode(bundle)) if bundle else []
    except ValueError:
        held = []
    new = x509.load_pem_x509_certificate(ca_pem)
    if new in held:
        return None
    pem = b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in [new, *held])
    return base64.b64encode(pem).decode()


def trust_patch(obj: dict[str, Any], namespace: str, service: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """The JSON patch that adds ``ca_pem`` to the ``caBundle`` of each webhook of ``obj`` served by the Service
    (guarded by the object's resourceVersion); empty when each trusts it already."""
    ops = []
    for pointer, config in client_configs(obj):
        ref = config.get("service") or {}
        if (ref.get("name"), ref.get("namespace")) != (service, namespace):
            continue
        if (bundle := bundle_with(config.get("caBundle"), ca_pem)) is not None:
            ops.append({"op": "add", "path": f"{pointer}/caBundle", "value": bundle})
    if not ops:
        return []
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]}, *ops]


def trust_new_ca(api: client.ApiClient, namespace: str, service: str, ca_pem: bytes) -> list[str]:
    """Add ``ca_pem`` to the ``caBundle`` of every admission and conversion webhook the Service serves (each kind
    read with one list); returns ``Kind/name`` of each object changed. An object changed meanwhile is read again."""
    dyn = DynamicClient(api)
    changed = []
    for api_version, kind in KINDS:
        res = dyn.resources.get(api_version=api_version, kind=kind)
        for item in json.loads(res.get(serialize=False).data).get("items") or []:
            if _trust(res, {"kind": kind, **item}, namespace, service, ca_pem):
                changed.append(f"{kind}/{item['metadata']['name']}")
    return changed


def _trust(res: Any, obj: dict[str, Any], namespace: str, service: str, ca_pem: bytes) -> bool:
    name = obj["metadata"]["name"]
    for _ in range(ATTEMPTS):
        patch = trust_patch(obj, namespace, service, ca_pem)
        if not patch:
            return False
        try:
            res.patch(body=patch, name=name, content_type=JSON_PATCH, field_manager=FIELD_MANAGER)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            if exc.status not in (409, 422):
                raise
        obj = {"kind": obj["kind"], **json.loads(res.get(name=name, serialize=False).data)}
    raise RuntimeError(f"{obj['kind']}/{name}: changed by others while its webhooks were given the new CA")
