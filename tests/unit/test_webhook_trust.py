"""A webhook certificate found and replaced: its webhooks trust the new CA before the Secret holds it."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes.dynamic.exceptions import NotFoundError

from installer.objects import certs
from installer.objects import webhook_trust as _webhook_trust

NS, SERVICE = "kubesphere-devops-system", "webhook-server-service"
LAYOUT = certs.Layout("s2i-webhook-server-cert", "s2i-webhook-ca", SERVICE, ("caBundle", "tls.crt", "tls.key"))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def cas(bundle: str) -> list[bytes]:
    return [c.public_bytes(serialization.Encoding.PEM)
            for c in x509.load_pem_x509_certificates(base64.b64decode(bundle))]


def hook(name: str, service: str, bundle: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"service": {"name": service, "namespace": NS, "path": "/validate"}}
    if bundle is not None:
        config["caBundle"] = bundle
    return {"name": name, "clientConfig": config}


@pytest.fixture(scope="module")
def old() -> dict[str, bytes]:
    return certs.generate(certs.dns_names(SERVICE, NS), validity=dt.timedelta(days=10))


def test_the_new_ca_is_trusted_beside_the_old(old: dict[str, bytes]) -> None:
    new = certs.generate(["x"])["ca.crt"]
    both = _webhook_trust.bundle_with(b64(old["ca.crt"]), new)
    assert both is not None and cas(both) == [new, old["ca.crt"]]
    assert _webhook_trust.bundle_with(both, new) is None  # trusted already: nothing to write
    assert cas(_webhook_trust.bundle_with(None, new) or "") == [new]
    assert cas(_webhook_trust.bundle_with(b64(b"not a certificate"), new) or "") == [new]


def test_only_the_webhooks_of_the_service_are_patched(old: dict[str, bytes]) -> None:
    new = certs.generate(["x"])["ca.crt"]
    config = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v", "resourceVersion": "7"},
              "webhooks": [hook("a", SERVICE, b64(old["ca.crt"])), hook("b", "other", b64(old["ca.crt"])),
                           hook("c", SERVICE, None)]}
    patch = _webhook_trust.trust_patch(config, NS, SERVICE, new)
    assert [op["op"] for op in patch] == ["test", "add", "add"]
    assert patch[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    assert [op["path"] for op in patch[1:]] == [f"/webhooks/{i}/clientConfig/caBundle" for i in (0, 2)]
    assert cas(patch[1]["value"]) == [new, old["ca.crt"]] and cas(patch[2]["value"]) == [new]
    conversion = {"strategy": "Webhook", "webhook": {"clientConfig": hook("", SERVICE, None)["clientConfig"]}}
    crd = {"kind": "CustomResourceDefinition", "metadata": {"name": "c", "resourceVersion": "3"},
           "spec": {"conversion": conversion}}
    assert [op["path"] for op in _webhook_trust.trust_patch(crd, NS, SERVICE, new)[1:]] == [
        "/spec/conversion/webhook/clientConfig/caBundle"]
    assert _webhook_trust.trust_patch({**crd, "spec": {"conversion": {"strategy": "None"}}}, NS, SERVICE, new) == []


class Cluster:
    """The Secret and one webhook configuration of a DynamicClient, in memory, with the order of the writes."""

    def __init__(self, secret: dict[str, Any] | None, config: dict[str, Any]) -> None:
        self.secret, self.config = secret, config
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def resource(self, kind: str) -> Any:
        cluster = self

        class Resource:
            def get(self, name: str = "", namespace: str = "", serialize: bool = True) -> Any:
                if kind == "Secret":
                    if cluster.secret is None:
                        raise NotFoundError(type("E", (), {"status": 404, "reason": "NotFound", "body": "",
                                                           "headers": {}})())
                    return type("Live", (), {"to_dict": lambda _self: json.loads(json.dumps(cluster.secret))})()
                items = [cluster.config] if kind == cluster.config["kind"] else []
                return type("Raw", (), {"data": json.dumps({"items": items}).encode()})()

            def patch(self, body: list[dict[str, Any]], **_: Any) -> None:
                if kind == "Secret":
                    return  # the field takeover: managed fields only
                for op in body[1:]:
                    index = int(op["path"].split("/")[2])
                    cluster.config["webhooks"][index]["clientConfig"]["caBundle"] = op["value"]
                cluster.writes.append((kind, json.loads(json.dumps(cluster.config))))

            def server_side_apply(self, body: dict[str, Any], **_: Any) -> Any:
                cluster.secret = body
                cluster.writes.append((kind, json.loads(json.dumps(body))))
                return type("Live", (), {"to_dict": lambda _self: json.loads(json.dumps(body))})()
        return Resource()


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch, old: dict[str, bytes]) -> Cluster:
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": LAYOUT.secret, "namespace": NS, "resourceVersion": "1"},
              "data": LAYOUT.to_secret(old)}
    config = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v", "resourceVersion": "2"},
              "webhooks": [hook("s2ibuildertemplate.kb.io", SERVICE, b64(old["ca.crt"]))]}
    fake = Cluster(secret, config)
    dynamic = lambda _api: type("D", (), {"resources": type("R", (), {  # noqa: E731
        "get": lambda _self, api_version, kind: fake.resource(kind)})()})()
    monkeypatch.setattr(_webhook_trust, "DynamicClient", dynamic)
    monkeypatch.setattr(certs, "DynamicClient", dynamic)
    return fake


def test_the_webhooks_trust_the_new_ca_before_the_secret_holds_it(cluster: Cluster, old: dict[str, bytes],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A certificate that expires within the renewal window is replaced: first the webhook of its Service trusts
    the new CA beside the old one, then the Secret holds the new certificate; each webhook trusts, at every write,
    the certificate the Secret holds."""
    outcome = certs.ensure_webhook_cert(None, NS, "devops", SERVICE, layout=LAYOUT)  # type: ignore[arg-type]
    assert outcome.changed and outcome.reason == "expires soon"
    assert outcome.note == f"Secret {NS}/{LAYOUT.secret}: replaced the certificate found there: expires soon"
    assert [kind for kind, _ in cluster.writes] == ["ValidatingWebhookConfiguration", "Secret"]
    new = LAYOUT.from_secret(cluster.writes[1][1]["data"])
    assert new["ca.crt"] != old["ca.crt"] and base64.b64decode(outcome.ca_bundle) == new["ca.crt"]
    assert cas(cluster.writes[0][1]["webhooks"][0]["clientConfig"]["caBundle"]) == [new["ca.crt"], old["ca.crt"]]
    assert cluster.writes[1][1]["metadata"]["labels"]["installer.kubesphere.io/module"] == "devops"
    # Kept now: nothing written again.
    monkeypatch.setattr(certs, "trusted_bundle", lambda _api, _ns, _svc, data: data["ca.crt"])
    kept = certs.ensure_webhook_cert(None, NS, "devops", SERVICE, layout=LAYOUT)  # type: ignore[arg-type]
    assert not kept.changed and len(cluster.writes) == 2


def test_nothing_to_trust_without_a_secret(cluster: Cluster) -> None:
    cluster.secret = None  # made anew: no webhook can serve a certificate that is not there
    made = certs.ensure_webhook_cert(None, NS, "devops", SERVICE, layout=LAYOUT)  # type: ignore[arg-type]
    assert made.reason == "missing" and [kind for kind, _ in cluster.writes] == ["Secret"]
