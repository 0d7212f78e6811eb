"""A webhook certificate Secret and the webhooks of its Service, watched while a run replaces the certificate.

:class:`TrustWatch` follows the API server's watch events of the Secret and of every admission webhook configuration.
At each change of the Secret's certificate it reads the webhook configurations, and at each change of a configuration
it reads the Secret: each :class:`Seen` says which webhooks of the Service did not trust (no CA in their ``caBundle``
issued) the certificate the Secret held. A write order that leaves one webhook distrusting what its server serves
(the Secret first, its CA later) is seen at the Secret's event, one in the right order never. :func:`served` is what
the webhook's endpoint serves (the simulated cluster's responder serves the Secret its pod mounts).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from kubernetes import client, watch

from installer.objects.certs import issued_by

CERT_KEY = "tls.crt"


def bundle_cas(bundle: str | None) -> list[x509.Certificate]:
    """The certificates of a ``caBundle`` (base64 PEM)."""
    try:
        return x509.load_pem_x509_certificates(base64.b64decode(bundle)) if bundle else []
    except ValueError:
        return []


def trusts(bundle: str | None, cert: bytes) -> bool:
    """Whether a CA of ``bundle`` issued ``cert`` (PEM), as the API server's TLS client requires."""
    leaf = x509.load_pem_x509_certificate(cert)
    return any(issued_by(leaf, ca) for ca in bundle_cas(bundle))


@dataclass
class Seen:
    """One change watched: what changed, the certificate the Secret held then, the webhooks that did not trust it."""

    what: str
    certificate: bytes
    untrusted: list[str]


@dataclass
class TrustWatch:
    """Watches Secret ``namespace/secret`` and the admission webhooks of Service ``namespace/service`` (a context
    manager around the run)."""

    api: client.ApiClient
    namespace: str
    secret: str
    service: str
    seen: list[Seen] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hooks(self, config: Any) -> dict[str, str | None]:
        """``Kind/name/webhook`` → its caBundle, of the webhooks of ``config`` the Service serves."""
        out = {}
        for hook in config.webhooks or []:
            ref = hook.client_config.service
            if ref is not None and (ref.name, ref.namespace) == (self.service, self.namespace):
                out[f"{config.kind}/{config.metadata.name}/{hook.name}"] = hook.client_config.ca_bundle
        return out

    def all_hooks(self) -> dict[str, str | None]:
        admission = client.AdmissionregistrationV1Api(self.api)
        out: dict[str, str | None] = {}
        for listed, kind in ((admission.list_mutating_webhook_configuration(), "MutatingWebhookConfiguration"),
                             (admission.list_validating_webhook_configuration(), "ValidatingWebhookConfiguration")):
            for config in listed.items:
                config.kind = kind
                out |= self.hooks(config)
        return out

    def certificate(self) -> bytes:
        secret = client.CoreV1Api(self.api).read_namespaced_secret(self.secret, self.namespace)
        return base64.b64decode((secret.data or {})[CERT_KEY])

    def record(self, what: str, cert: bytes, hooks: dict[str, str | None]) -> None:
        with self._lock:
            self.seen.append(Seen(what, cert, sorted(h for h, bundle in hooks.items() if not trusts(bundle, cert))))

    @property
    def replaced(self) -> bool:
        """Whether the Secret's certificate changed while watched."""
        return len({s.certificate for s in self.seen}) > 1

    @property
    def distrusted(self) -> list[Seen]:
        """The changes after which a webhook of the Service did not trust the Secret's certificate."""
        return [s for s in self.seen if s.untrusted]

    def __enter__(self) -> TrustWatch:
        core, admission = client.CoreV1Api(self.api), client.AdmissionregistrationV1Api(self.api)
        last = [self.certificate()]
        self.record("start", last[0], self.all_hooks())

        def secret_changed(obj: Any) -> None:
            cert = base64.b64decode((obj.data or {}).get(CERT_KEY) or "")
            if cert and cert != last[0]:
                last[0] = cert
                self.record(f"Secret {self.namespace}/{self.secret}", cert, self.all_hooks())

        def config_changed(kind: str) -> Callable[[Any], None]:
            known: dict[str, dict[str, str | None]] = {}

            def changed(obj: Any) -> None:
                obj.kind = kind
                hooks = self.hooks(obj)
                if hooks and hooks != known.get(obj.metadata.name):
                    known[obj.metadata.name] = hooks
                    self.record(f"{kind}/{obj.metadata.name}", self.certificate(), hooks)
            return changed

        follows = [
            (core.list_namespaced_secret, {"namespace": self.namespace,
                                           "field_selector": f"metadata.name={self.secret}"}, secret_changed),
            (admission.list_mutating_webhook_configuration, {}, config_changed("MutatingWebhookConfiguration")),
            (admission.list_validating_webhook_configuration, {}, config_changed("ValidatingWebhookConfiguration")),
        ]
        for lister, args, handle in follows:
            thread = threading.Thread(target=self._follow, args=(lister, args, handle), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _follow(self, lister: Callable[..., Any], args: dict[str, Any], handle: Callable[[Any], None]) -> None:
        """List, then watch from the list's resourceVersion for a few seconds, again until stopped (a resourceVersion
        never gets old enough to be gone); the handlers see each state once."""
        try:
            while not self._stop.is_set():
                listed = lister(**args)
                for item in listed.items:
                    handle(item)
                for event in watch.Watch().stream(lister, resource_version=listed.metadata.resource_version,
                                                  timeout_seconds=2, **args):
                    if event["type"] in ("ADDED", "MODIFIED"):
                        handle(event["object"])
        except BaseException as exc:  # reported by __exit__
            self.errors.append(exc)

    def __exit__(self, *_: object) -> None:
        time.sleep(1)  # the last events of the run reach the watches
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        assert not self.errors, self.errors


def served(api: client.ApiClient, namespace: str, service: str, timeout: float = 30) -> bytes:
    """The certificate (PEM) a ready endpoint of the Service serves, by TLS to its address and port, as the API
    server dials a webhook's endpoint (server name ``<service>.<namespace>.svc``; not verified here)."""
    deadline = time.monotonic() + timeout
    while True:
        raw = api.call_api(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", "GET",
                           query_params=[("labelSelector", f"kubernetes.io/service-name={service}")],
                           auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True).data
        for slice_ in json.loads(raw)["items"]:
            port = (slice_.get("ports") or [{}])[0].get("port") or 443
            for endpoint in slice_.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") and endpoint.get("addresses"):
                    return _peer(endpoint["addresses"][0], port, f"{service}.{namespace}.svc")
        assert time.monotonic() < deadline, f"no ready endpoint of Service {namespace}/{service}"
        time.sleep(0.5)


def _peer(address: str, port: int, name: str) -> bytes:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection((address, port), timeout=10) as sock, \
            ctx.wrap_socket(sock, server_hostname=name) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der, f"{address}:{port} served no certificate"
    return ssl.DER_cert_to_PEM_cert(der).encode()
