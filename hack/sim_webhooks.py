#!/usr/bin/env python3
"""The admission and conversion webhooks of a simulated cluster, answered as the components' pods would answer.

kube-apiserver dials a webhook Service's endpoint IPs (``--enable-aggregator-routing``); in the simulated cluster
those are kwok pod IPs in the cluster's pod range, which is routed local, so this process can listen on them.
Run as ``python hack/sim_webhooks.py --kubeconfig K --pod-cidr C`` (``hack/simcluster.py`` starts it). It watches
MutatingWebhookConfigurations, ValidatingWebhookConfigurations and CRDs with a conversion webhook, resolves each
``clientConfig.service`` to its EndpointSlices and, for every endpoint IP inside the pod range, listens with TLS on
that IP and the endpoint's port. The serving certificate is the one the endpoint's pod would serve: the key pair in
a Secret the pod mounts (secret and projected volumes) whose certificate covers ``<service>.<namespace>.svc``
(chosen by the request's server name when several Services share an IP and port; a pod whose only key pair covers
other names serves it anyway, and the API server refuses it as it would on a real cluster). A pod that mounts no key
pair serves nothing. A wrong caBundle therefore fails the TLS handshake exactly as on a real cluster.

Every AdmissionReview (admission.k8s.io/v1 and v1beta1) is allowed, with the request's uid and no patch; a
ConversionReview gets its objects back with ``apiVersion`` set to the desired version. One line per listener
started, reloaded or stopped and per call goes to stdout.

Runtime steps the installer leaves to the components themselves are played here, and only those (a component is
recognised by its container image and arguments, and acts only while one of its pods is Running):

=========================  ============================================================================
webhooks (module)          serving certificate and caBundle
=========================  ============================================================================
ks-controller-manager      installer: Secret ks-controller-manager-webhook-cert (ks_webhook_cert), caBundle
(ks-core; also the            rendered; the conversion webhooks of multicluster's federated notification types
conversion webhooks)          use its CA too. Nothing simulated.
notification-manager       installer: Secret notification-manager-webhook-server-cert, caBundle rendered into
(monitoring)                  the webhook and the CRDs' conversion webhook (upstream's hook Job). Nothing simulated.
kube-events-operator       installer: Secret ks-events-admission. Nothing simulated.
(events)
logsidecar-injector        installer: Secret logsidecar-injector-admission-certs. Nothing simulated.
(logging)
kubefed-admission-webhook  installer: Secret kubefed-admission-webhook-serving-cert (the chart's genCA
(multicluster)                upstream). Nothing simulated.
s2ioperator (devops)       installer: Secret s2i-webhook-server-cert. Nothing simulated.
gatekeeper v3.5.2          component: cert-controller v0.2.0's rotator in the ``--operation=webhook`` pod fills
(gatekeeper)                  the existing Secret gatekeeper-webhook-server-cert (ca.crt, ca.key, tls.crt,
                              tls.key: CA "gatekeeper-ca"/O=gatekeeper and a certificate for
                              gatekeeper-webhook-service.<ns>.svc, RSA 2048, 10 years) when its CA or
                              certificate is missing, invalid or expires within 90 days, and writes ca.crt into
                              every webhook's caBundle of gatekeeper-validating-webhook-configuration (and of
                              the mutating one with ``--enable-mutation``). Simulated; the pod serves the Secret.
istiod 1.14 (servicemesh)  component: istiod uses Secret ``cacerts`` if present, else loads or creates its
                              self-signed CA in Secret istio-ca-secret (type istio.io/ca-root, ca-cert.pem and
                              ca-key.pem, O=cluster.local); it serves a certificate from that CA kept in memory
                              (istiod-<rev>, istiod, istiod-remote, istio-pilot .<ns>.svc); it writes the root
                              into the caBundle of the ``*sidecar-injector.istio.io`` webhooks of the
                              MutatingWebhookConfigurations labelled istio.io/rev=<rev>, and into every webhook of
                              the ValidatingWebhookConfigurations so labelled, whose failurePolicy it sets to
                              Ignore until a dry-run create of an invalid Gateway is denied, then to Fail. Its
                              /validate denies a Gateway without servers (that check's answer); all else is
                              allowed. Simulated.
=========================  ============================================================================

No module registers an APIService backed by pods in the pod range (metrics-server runs on node addresses, served by
a real metrics-server), so APIServices are not followed.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import hashlib
import ipaddress
import json
import os
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

Obj = dict[str, Any]
WATCHED = {
    "mwc": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "vwc": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "crd": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "svc": "/api/v1/services",
    "eps": "/apis/discovery.k8s.io/v1/endpointslices",
    "pod": "/api/v1/pods",
    "secret": "/api/v1/secrets",
}
KIND = {"mwc": ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
        "vwc": ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
        "secret": ("v1", "Secret")}


def log(msg: str) -> None:
    print(f"{dt.datetime.now().strftime('%H:%M:%S.%f')[:-3]} {msg}", flush=True)


# ---------------------------------------------------------------------------------------------- api


class Kube:
    """JSON requests to the API server of a kubeconfig (raw dicts, no models)."""

    def __init__(self, kubeconfig: str) -> None:
        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = 2 * len(WATCHED)  # one long watch per resource, and requests
        self.api = client.ApiClient(configuration)

    def raw(self, method: str, path: str, query: list[tuple[str, str]] | None = None, body: Any = None,
            content_type: str = "application/json", timeout: Any = 30) -> Any:
        """The urllib3 response (not read); :class:`ApiException` on a non-2xx status."""
        return self.api.call_api(path, method, query_params=query or [], body=body, auth_settings=["BearerToken"],
                                 header_params={"Accept": "application/json", "Content-Type": content_type},
                                 _preload_content=False, _return_http_data_only=True, _request_timeout=timeout)

    def call(self, method: str, path: str, query: list[tuple[str, str]] | None = None, body: Any = None) -> Obj:
        return json.loads(self.raw(method, path, query, body).data or b"{}")


class Informer(threading.Thread):
    """A list+watch cache of one resource (``items`` by ``namespace/name``); sets ``changed`` on every change."""

    def __init__(self, kube: Kube, path: str, changed: threading.Event) -> None:
        super().__init__(daemon=True, name=path)
        self.kube, self.path, self.changed = kube, path, changed
        self.items: dict[str, Obj] = {}
        self.synced = False

    @staticmethod
    def key(obj: Obj) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace') or ''}/{meta.get('name')}"

    def run(self) -> None:
        while True:
            try:
                listing = self.kube.call("GET", self.path)
                self.items = {self.key(o): o for o in listing.get("items") or []}
                self.synced = True
                self.changed.set()
                self._watch(listing["metadata"]["resourceVersion"])
            except Exception as exc:  # the API server restarting or gone: list again shortly
                if not isinstance(exc, (ApiException, OSError, ValueError, KeyError)):
                    log(f"watch {self.path}: {type(exc).__name__}: {exc}")
                time.sleep(1)

    def _watch(self, rv: str) -> None:
        """Follow the watch from ``rv`` until it expires (410) or fails."""
        while True:
            query = [("watch", "1"), ("resourceVersion", rv), ("allowWatchBookmarks", "true"),
                     ("timeoutSeconds", "240")]
            resp = self.kube.raw("GET", self.path, query, timeout=(10, 300))
            try:
                for line in resp:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        return  # expired: list again
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event["type"] == "DELETED":
                        self.items.pop(self.key(obj), None)
                    elif event["type"] in ("ADDED", "MODIFIED"):
                        self.items[self.key(obj)] = obj
                    else:
                        continue
                    self.changed.set()
            finally:
                resp.release_conn()


# --------------------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Pair:
    """A serving certificate (PEM, with any chain after it), its key (PEM), its DNS names and where it is from."""

    chain: bytes
    key: bytes
    names: frozenset[str]
    source: str

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.chain + self.key).hexdigest()[:16]

    def covers(self, host: str) -> bool:
        return any(n == host or (n.startswith("*.") and host.split(".", 1)[-1] == n[2:]) for n in self.names)


def dns_names(cert: x509.Certificate) -> frozenset[str]:
    try:
        return frozenset(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                         .get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        return frozenset()


def is_ca(cert: x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _spki(key: Any) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def secret_pairs(secret: Obj) -> list[Pair]:
    """The serving key pairs in a Secret: each non-CA certificate with the private key that matches it."""
    certs: list[tuple[x509.Certificate, bytes]] = []
    keys: list[tuple[Any, bytes]] = []
    for name in sorted(secret.get("data") or {}):
        with contextlib.suppress(ValueError, TypeError):
            raw = base64.b64decode(secret["data"][name])
            if b"PRIVATE KEY-----" in raw:
                keys.append((serialization.load_pem_private_key(raw, password=None), raw))
            elif b"CERTIFICATE-----" in raw:
                leaf = x509.load_pem_x509_certificates(raw)[0]
                if not is_ca(leaf):
                    certs.append((leaf, raw))
    meta = secret["metadata"]
    return [Pair(chain, key_pem, dns_names(leaf), f"Secret {meta['namespace']}/{meta['name']}")
            for leaf, chain in certs for key, key_pem in keys if _spki(key.public_key()) == _spki(leaf.public_key())]


def _rsa_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def issue(subject: x509.Name, names: list[str], ca: tuple[x509.Certificate, Any] | None, days: int,
          serial: int | None = None, server_only: bool = True) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    """An RSA 2048 certificate: self-signed CA when ``ca`` is None, else a serving certificate signed by it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = dt.datetime.now(dt.UTC)
    issuer, signer = (ca[0].subject, ca[1]) if ca else (subject, key)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(serial or x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=ca is None,
                                            content_commitment=False, data_encipherment=False, key_agreement=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True))
    if ca is not None:
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] + ([] if server_only else [ExtendedKeyUsageOID.CLIENT_AUTH])
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                                        critical=False)
    return builder.sign(signer, hashes.SHA256()), key


def valid_cert(ca_pem: bytes, cert_pem: bytes, key_pem: bytes, dns_name: str, at: dt.datetime) -> bool:
    """cert-controller's ValidCert: the pair matches, ``cert`` is signed by ``ca``, covers ``dns_name`` and is
    valid at ``at``."""
    try:
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return (_spki(key.public_key()) == _spki(cert.public_key()) and dns_name in dns_names(cert)
            and cert.not_valid_before_utc <= at <= cert.not_valid_after_utc
            and ca.not_valid_before_utc <= at <= ca.not_valid_after_utc)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(data: str | None) -> bytes:
    return base64.b64decode(data or "")


# ---------------------------------------------------------------------------------------- components


def running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def container(pod: Obj, repository: str) -> Obj | None:
    """The pod's container whose image repository ends in ``/<repository>`` (or is it)."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        image = c.get("image", "").split("@")[0]
        last = image.rsplit("/", 1)[-1]
        if last.split(":")[0] == repository:
            return c
    return None


def env(c: Obj, name: str, default: str = "") -> str:
    return next((e.get("value") or default for e in c.get("env") or [] if e.get("name") == name), default)


class Component:
    """A runtime step of one component: ``reconcile`` acts on the cluster, ``pairs`` names what a pod serves from
    memory (None: its mounted Secrets), ``verdict`` overrides the allowed answer."""

    name = "component"

    def __init__(self, kube: Kube, cache: dict[str, Informer]) -> None:
        self.kube, self.cache = kube, cache

    def reconcile(self) -> None: ...

    def pairs(self, pod: Obj) -> list[Pair] | None:
        return None

    def verdict(self, pod: Obj, path: str, request: Obj) -> Obj | None:
        return None

    def items(self, kind: str) -> list[Obj]:
        return list(self.cache[kind].items.values())

    def update(self, kind: str, obj: Obj, manager: str, what: str) -> None:
        """PUT ``obj`` (with its resourceVersion: a conflict waits for the next round) as field manager
        ``manager``."""
        api_version, kind_name = KIND[kind]
        meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
        path = WATCHED[kind] if not meta.get("namespace") else f"/api/v1/namespaces/{meta['namespace']}/secrets"
        try:
            self.kube.call("PUT", f"{path}/{meta['name']}", [("fieldManager", manager)],
                           {**obj, "apiVersion": api_version, "kind": kind_name, "metadata": meta})
            log(f"{self.name}: {what}")
        except ApiException as exc:
            if exc.status != 409:
                log(f"{self.name}: {what} failed: {exc.status} {exc.reason}")


class Gatekeeper(Component):
    """Gatekeeper v3.5.2's certificate rotation (open-policy-agent/cert-controller v0.2.0)."""

    name = "gatekeeper"
    SECRET, SERVICE, CA_NAME, CA_ORG = "gatekeeper-webhook-server-cert", "gatekeeper-webhook-service", \
        "gatekeeper-ca", "gatekeeper"
    WEBHOOKS = (("vwc", "gatekeeper-validating-webhook-configuration"),)
    MUTATING = ("mwc", "gatekeeper-mutating-webhook-configuration")
    LOOKAHEAD = dt.timedelta(days=90)

    def __init__(self, kube: Kube, cache: dict[str, Informer]) -> None:
        super().__init__(kube, cache)
        self._valid: dict[str, tuple[str | None, dt.date]] = {}  # namespace: the Secret version found valid

    def reconcile(self) -> None:
        done: set[str] = set()
        for pod in self.items("pod"):
            c = container(pod, "gatekeeper")
            ns = pod["metadata"]["namespace"]
            if c is None or not running(pod) or ns in done:
                continue
            args = c.get("args") or []
            operations = [a.split("=", 1)[1] for a in args if a.startswith("--operation=")]
            if "--disable-cert-rotation" in args or (operations and "webhook" not in operations):
                continue
            done.add(ns)
            webhooks = self.WEBHOOKS + ((self.MUTATING,) if "--enable-mutation" in args
                                        or "--enable-mutation=true" in args else ())
            self._rotate(ns, webhooks)

    def _rotate(self, ns: str, webhooks: tuple[tuple[str, str], ...]) -> None:
        secret = self.cache["secret"].items.get(f"{ns}/{self.SECRET}")
        if secret is None:
            return  # the rotator needs the Secret to exist
        data = {k: unb64(v) for k, v in (secret.get("data") or {}).items()}
        dns_name, at = f"{self.SERVICE}.{ns}.svc", dt.datetime.now(dt.UTC) + self.LOOKAHEAD
        version = (secret["metadata"].get("resourceVersion"), at.date())
        ca_ok = self._valid.get(ns) == version or valid_cert(
            data.get("ca.crt", b""), data.get("ca.crt", b""), data.get("ca.key", b""), self.CA_NAME, at)
        if not ca_ok or (self._valid.get(ns) != version and not valid_cert(
                data.get("ca.crt", b""), data.get("tls.crt", b""), data.get("tls.key", b""), dns_name, at)):
            if ca_ok:
                ca = (x509.load_pem_x509_certificate(data["ca.crt"]),
                      serialization.load_pem_private_key(data["ca.key"], password=None))
            else:
                subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.CA_NAME),
                                     x509.NameAttribute(NameOID.ORGANIZATION_NAME, self.CA_ORG)])
                ca = issue(subject, [self.CA_NAME], None, 3650)
                data["ca.crt"], data["ca.key"] = _pem(ca[0]), _rsa_pem(ca[1])
            cert, key = issue(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_name)]), [dns_name], ca, 3650,
                              serial=1)
            data["tls.crt"], data["tls.key"] = _pem(cert), _rsa_pem(key)
            secret = {**secret, "data": {**(secret.get("data") or {}), **{k: b64(v) for k, v in data.items()}}}
            what = "server certificate" if ca_ok else "CA and server certificate"
            self.update("secret", secret, "manager", f"wrote {what} into Secret {ns}/{self.SECRET}")
            return  # the caBundle follows from the updated Secret in the next round
        self._valid[ns] = version  # checking the pair again on every event costs a core
        bundle = b64(data["ca.crt"])
        for kind, name in webhooks:
            obj = self.cache[kind].items.get(f"/{name}")
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            hooks = obj.get("webhooks") or []
            if all(h.get("clientConfig", {}).get("caBundle") == bundle for h in hooks):
                continue
            patched = [{**h, "clientConfig": {**h.get("clientConfig", {}), "caBundle": bundle}} for h in hooks]
            self.update(kind, {**obj, "webhooks": patched}, "manager", f"caBundle of {KIND[kind][1]} {name}")


@dataclass
class _Istiod:
    """One istiod revision's CA (certificate, key, root) and in-memory serving pair."""

    ca: tuple[x509.Certificate, Any]
    root: bytes
    chain_tail: bytes
    pair: Pair
    validation_ready: bool = False
    last_check: float = 0.0
    source: str = ""  # the Secret and resourceVersion the CA was read from


class Istiod(Component):
    """istiod 1.14's CA, serving certificate, webhook patcher and validation controller."""

    name = "istiod"
    INJECTOR_SUFFIX = "sidecar-injector.istio.io"
    CA_SECRET, PLUGGED = "istio-ca-secret", "cacerts"

    def __init__(self, kube: Kube, cache: dict[str, Informer]) -> None:
        super().__init__(kube, cache)
        self.revisions: dict[tuple[str, str], _Istiod] = {}

    @staticmethod
    def revision(pod: Obj) -> tuple[str, str] | None:
        c = container(pod, "pilot")
        if c is None or "discovery" not in (c.get("args") or [])[:1]:
            return None
        return pod["metadata"]["namespace"], env(c, "REVISION", "default") or "default"

    def pairs(self, pod: Obj) -> list[Pair] | None:
        rev = self.revision(pod)
        if rev is None:
            return None
        state = self.revisions.get(rev)
        return [state.pair] if state else []

    def verdict(self, pod: Obj, path: str, request: Obj) -> Obj | None:
        obj = request.get("object") or {}
        if (self.revision(pod) and path.startswith("/validate") and request.get("kind", {}).get("kind") == "Gateway"
                and not (obj.get("spec") or {}).get("servers")):
            return {"allowed": False, "status": {"code": 400, "reason": "BadRequest",
                                                 "message": "configuration is invalid: gateway must have at least "
                                                            "one server"}}
        return None

    def reconcile(self) -> None:
        live = {rev for pod in self.items("pod") if running(pod) and (rev := self.revision(pod))}
        for rev in set(self.revisions) - live:
            del self.revisions[rev]  # a restarted istiod makes a new serving certificate and checks again
        for rev in sorted(live):
            state = self._state(*rev)
            if state is not None:
                self._patch_injectors(rev[1], state)
                self._patch_validators(rev, state)

    def _state(self, ns: str, rev: str) -> _Istiod | None:
        plugged = self.cache["secret"].items.get(f"{ns}/{self.PLUGGED}")
        secrets = self.cache["secret"].items
        found = plugged if plugged is not None else secrets.get(f"{ns}/{self.CA_SECRET}")
        source = f"{Informer.key(found)}@{found['metadata'].get('resourceVersion')}" if found is not None else ""
        state = self.revisions.get((ns, rev))
        if state is not None and source and state.source == source:
            return state  # parsing the CA key again on every event costs a core
        if plugged is not None:
            data = {k: unb64(v) for k, v in (plugged.get("data") or {}).items()}
            cert_pem, key_pem = data.get("ca-cert.pem", b""), data.get("ca-key.pem", b"")
            root, tail = data.get("root-cert.pem") or cert_pem, data.get("cert-chain.pem") or cert_pem
        elif f"{ns}/{self.CA_SECRET}" in secrets:
            data = {k: unb64(v) for k, v in (secrets[f"{ns}/{self.CA_SECRET}"].get("data") or {}).items()}
            cert_pem, key_pem = data.get("ca-cert.pem", b""), data.get("ca-key.pem", b"")
            root, tail = cert_pem, b""
        else:
            ca_cert, ca_key = issue(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cluster.local")]), [],
                                    None, 3650)
            body = {"apiVersion": "v1", "kind": "Secret", "type": "istio.io/ca-root",
                    "metadata": {"name": self.CA_SECRET, "namespace": ns},
                    "data": {"ca-cert.pem": b64(_pem(ca_cert)), "ca-key.pem": b64(_rsa_pem(ca_key)),
                             "cert-chain.pem": "", "key.pem": "", "root-cert.pem": ""}}
            try:
                self.kube.call("POST", f"/api/v1/namespaces/{ns}/secrets", [("fieldManager", "pilot-discovery")],
                               body)
                log(f"istiod {ns}/{rev}: created its CA in Secret {ns}/{self.CA_SECRET}")
            except ApiException as exc:
                if exc.status != 409:
                    log(f"istiod {ns}/{rev}: creating Secret {self.CA_SECRET} failed: {exc.status} {exc.reason}")
            return None  # the next round reads it back
        try:
            ca = (x509.load_pem_x509_certificate(cert_pem), serialization.load_pem_private_key(key_pem, None))
        except ValueError:
            return None  # istiod would not start with an unreadable CA
        if state is not None and state.ca[0] == ca[0] and state.root == root:
            state.source = source
            return state
        hosts = [f"istiod-{rev}.{ns}.svc"] if rev != "default" else []
        hosts += [f"{h}.{ns}.svc" for h in ("istiod", "istiod-remote", "istio-pilot")]
        cert, key = issue(x509.Name([]), hosts, ca, 365, server_only=False)
        pair = Pair(_pem(cert) + tail, _rsa_pem(key), frozenset(hosts), f"istiod {ns}/{rev} (in memory)")
        self.revisions[(ns, rev)] = state = _Istiod(ca, root, tail, pair, source=source)
        log(f"istiod {ns}/{rev}: serving certificate for {', '.join(hosts)} from "
            f"{'Secret ' + self.PLUGGED if plugged is not None else 'its CA'}")
        return state

    def _patch_injectors(self, rev: str, state: _Istiod) -> None:
        bundle = b64(state.root)
        for obj in self.items("mwc"):
            if (obj["metadata"].get("labels") or {}).get("istio.io/rev") != rev:
                continue
            hooks = obj.get("webhooks") or []
            patched = [{**h, "clientConfig": {**h.get("clientConfig", {}), "caBundle": bundle}}
                       if h.get("name", "").endswith(self.INJECTOR_SUFFIX) else h for h in hooks]
            if patched != hooks:
                self.update("mwc", {**obj, "webhooks": patched}, "pilot-discovery",
                            f"caBundle of MutatingWebhookConfiguration {obj['metadata']['name']}")

    def _patch_validators(self, rev: tuple[str, str], state: _Istiod) -> None:
        configs = [o for o in self.items("vwc") if (o["metadata"].get("labels") or {}).get("istio.io/rev") == rev[1]]
        if not configs:
            return
        bundle = b64(state.root)
        if not state.validation_ready and time.monotonic() - state.last_check > 1:
            patched_all = all(h.get("clientConfig", {}).get("caBundle") == bundle
                              for o in configs for h in o.get("webhooks") or [])
            if patched_all:  # as istiod: the check after the first update with the caBundle
                state.last_check = time.monotonic()
                state.validation_ready = self._invalid_config_rejected(*rev)
        policy = "Fail" if state.validation_ready else "Ignore"
        for obj in configs:
            hooks = obj.get("webhooks") or []
            patched = [{**h, "clientConfig": {**h.get("clientConfig", {}), "caBundle": bundle},
                        "failurePolicy": policy} for h in hooks]
            if patched != hooks:
                self.update("vwc", {**obj, "webhooks": patched}, "pilot-discovery",
                            f"caBundle and failurePolicy={policy} of ValidatingWebhookConfiguration "
                            f"{obj['metadata']['name']}")

    def _invalid_config_rejected(self, ns: str, rev: str) -> bool:
        """istiod's isDryRunOfInvalidConfigRejected: a dry-run create of an invalid Gateway must be denied."""
        body = {"apiVersion": "networking.istio.io/v1alpha3", "kind": "Gateway",
                "metadata": {"name": "invalid-gateway", "namespace": ns, "labels": {"istio.io/rev": rev}}, "spec": {}}
        path = f"/apis/networking.istio.io/v1alpha3/namespaces/{ns}/gateways"
        try:
            try:
                self.kube.call("POST", path, [("dryRun", "All")], body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                self.kube.call("PUT", f"{path}/invalid-gateway", [("dryRun", "All")], body)
        except ApiException as exc:
            text = (exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body))
            ready = any(f in text for f in ("denied the request", "the server could not find the requested resource",
                                            "does not support dry run")) or exc.status == 404
            if ready:
                log(f"istiod {ns}/{rev}: invalid config rejected, validation is ready")
            return ready
        return False


# ------------------------------------------------------------------------------------------- serving


@dataclass
class Route:
    """What one Service name on a listener serves: the pod behind it and its key pair."""

    host: str
    pod: Obj
    pair: Pair


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    listener: Listener
    connections: set[ssl.SSLSocket]

    def close_connections(self) -> None:
        """End the kept-alive connections too: a stopped pod answers nothing more."""
        for conn in list(self.connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(10)
        try:
            conn = self.listener.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log(f"tls {self.listener.name} from {client_address[0]}: {exc}")
            return
        self.connections.add(conn)
        try:
            conn.settimeout(60)
            self.RequestHandlerClass(conn, client_address, self)
        except OSError:
            pass  # the API server went away mid-request, or the listener stopped
        finally:
            self.connections.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _TLSServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        status, answer = self.server.listener.answer(host, self.path.split("?", 1)[0], body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


def load_pair(ctx: ssl.SSLContext, pair: Pair) -> ssl.SSLContext:
    """Load ``pair`` into ``ctx`` (through a private temporary directory: ssl reads files only)."""
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        for path, data in ((cert, pair.chain), (key, pair.key)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cert, key)
    return ctx


_CONTEXTS: dict[str, ssl.SSLContext] = {}


def server_context(pair: Pair) -> ssl.SSLContext:
    """A TLS server context for ``pair`` (cached by fingerprint)."""
    if pair.fingerprint not in _CONTEXTS:
        _CONTEXTS[pair.fingerprint] = load_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), pair)
    return _CONTEXTS[pair.fingerprint]


class Listener:
    """A TLS listener on one pod IP and port, serving each Service name with its pod's key pair."""

    def __init__(self, ip: str, port: int, routes: dict[str, Route],
                 verdict: Callable[[Obj, str, Obj], Obj | None]) -> None:
        self.ip, self.port, self.routes, self.verdict = ip, port, routes, verdict
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.sni_callback = self._sni
        self._use_default()
        self.server = _TLSServer((ip, port), _Handler, bind_and_activate=False)
        self.server.listener, self.server.connections = self, set()

    @property
    def name(self) -> str:
        return f"{self.ip}:{self.port}"

    def _use_default(self) -> None:
        """Without a server name (or an unknown one) the handshake gets the first route's pair."""
        load_pair(self.context, next(iter(self.routes.values())).pair)

    def _sni(self, conn: Any, name: str | None, _ctx: ssl.SSLContext) -> None:
        route = self.routes.get(name or "")
        if route is not None:
            conn.context = server_context(route.pair)

    def describe(self) -> str:
        return "; ".join(f"{h} (pod {r.pod['metadata']['namespace']}/{r.pod['metadata']['name']}, {r.pair.source})"
                         for h, r in sorted(self.routes.items()))

    def start(self) -> None:
        try:
            self.server.server_bind()
            self.server.server_activate()
        except OSError:
            self.server.server_close()
            raise
        threading.Thread(target=self.server.serve_forever, daemon=True, name=self.name).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.server.close_connections()

    def update(self, routes: dict[str, Route]) -> bool:
        """Serve ``routes`` from now on; whether anything served changed."""
        before = {h: r.pair.fingerprint for h, r in self.routes.items()}
        self.routes = routes
        if before == {h: r.pair.fingerprint for h, r in routes.items()}:
            return False
        self._use_default()
        return True

    def answer(self, host: str, path: str, body: bytes) -> tuple[int, Obj]:
        """The reply to one POST: an AdmissionReview or ConversionReview."""
        route = self.routes.get(host) or next(iter(self.routes.values()))
        try:
            review = json.loads(body)
            request = review["request"]
        except (ValueError, KeyError, TypeError):
            log(f"call {self.name} {host}{path}: not a review")
            return 400, {"error": "expected an AdmissionReview or ConversionReview"}
        if review.get("kind") == "ConversionReview":
            desired = request.get("desiredAPIVersion")
            objects = [{**o, "apiVersion": desired} for o in request.get("objects") or []]
            log(f"call {self.name} {host}{path} ConversionReview {len(objects)} object(s) to {desired} "
                f"uid={request.get('uid')}")
            return 200, {"apiVersion": review.get("apiVersion"), "kind": "ConversionReview",
                         "response": {"uid": request.get("uid"), "convertedObjects": objects,
                                      "result": {"status": "Success"}}}
        if review.get("kind") != "AdmissionReview":
            log(f"call {self.name} {host}{path}: unknown kind {review.get('kind')!r}")
            return 400, {"error": f"unknown kind {review.get('kind')!r}"}
        response: Obj = {"uid": request.get("uid"), "allowed": True}
        response |= self.verdict(route.pod, path, request) or {}
        meta = (request.get("object") or request.get("oldObject") or {}).get("metadata") or {}
        name = request.get("name") or meta.get("name") or f"{meta.get('generateName', '')}*"
        resource = request.get("resource") or {}
        where = f"{request.get('namespace')}/{name}" if request.get("namespace") else name
        log(f"call {self.name} {host}{path} {request.get('operation')} {resource.get('resource')} {where} "
            f"uid={request.get('uid')} allowed={str(response['allowed']).lower()}")
        return 200, {"apiVersion": review.get("apiVersion"), "kind": "AdmissionReview", "response": response}


# ------------------------------------------------------------------------------------------ responder


@dataclass
class Responder:
    """Follows the webhooks and keeps one :class:`Listener` per endpoint IP and port in the pod range."""

    kube: Kube
    pod_cidr: ipaddress.IPv4Network | ipaddress.IPv6Network
    changed: threading.Event = field(default_factory=threading.Event)
    cache: dict[str, Informer] = field(default_factory=dict)
    listeners: dict[tuple[str, int], Listener] = field(default_factory=dict)
    components: list[Component] = field(default_factory=list)
    _pairs: dict[str, tuple[str, list[Pair]]] = field(default_factory=dict)
    _refused: dict[tuple[str, int], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cache = {k: Informer(self.kube, path, self.changed) for k, path in WATCHED.items()}
        self.components = [Gatekeeper(self.kube, self.cache), Istiod(self.kube, self.cache)]

    def run(self) -> None:
        for informer in self.cache.values():
            informer.start()
        log(f"following webhooks served in {self.pod_cidr}")
        while True:
            self.changed.wait(timeout=1)
            if not all(i.synced for i in self.cache.values()):
                continue
            time.sleep(0.1)  # let a burst of events settle
            self.changed.clear()
            self.step()

    def step(self) -> None:
        for component in self.components:
            try:
                component.reconcile()
            except Exception as exc:  # one component's failure must not stop the others or the serving
                log(f"{component.name}: {type(exc).__name__}: {exc}")
        self.apply(self.desired())

    def services(self) -> Iterator[tuple[str, str, int]]:
        """(namespace, name, port) of every webhook Service: admission webhooks and CRD conversion."""
        for kind in ("mwc", "vwc"):
            for obj in list(self.cache[kind].items.values()):
                for hook in obj.get("webhooks") or []:
                    svc = (hook.get("clientConfig") or {}).get("service")
                    if svc:
                        yield svc["namespace"], svc["name"], int(svc.get("port") or 443)
        for crd in list(self.cache["crd"].items.values()):
            conversion = (crd.get("spec") or {}).get("conversion") or {}
            svc = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("service")
            if conversion.get("strategy") == "Webhook" and svc:
                yield svc["namespace"], svc["name"], int(svc.get("port") or 443)

    def desired(self) -> dict[tuple[str, int], dict[str, Route]]:
        out: dict[tuple[str, int], dict[str, Route]] = {}
        for ns, name, port in set(self.services()):
            service = self.cache["svc"].items.get(f"{ns}/{name}")
            sport = next((p for p in ((service or {}).get("spec") or {}).get("ports") or []
                          if p.get("port") == port), None)
            if sport is None:
                continue
            host = f"{name}.{ns}.svc"
            for eps in list(self.cache["eps"].items.values()):
                meta = eps["metadata"]
                if meta.get("namespace") != ns or (meta.get("labels") or {}).get("kubernetes.io/service-name") != name:
                    continue
                target = next((p.get("port") for p in eps.get("ports") or []
                               if (p.get("name") or "") == (sport.get("name") or "")), None)
                for endpoint in eps.get("endpoints") or []:
                    ref = endpoint.get("targetRef") or {}
                    pod = self.cache["pod"].items.get(f"{ref.get('namespace', ns)}/{ref.get('name')}")
                    if target is None or ref.get("kind") != "Pod" or pod is None:
                        continue
                    pair = self.pair_for(pod, host)
                    for ip in endpoint.get("addresses") or []:
                        if pair is not None and ipaddress.ip_address(ip) in self.pod_cidr:
                            out.setdefault((ip, int(target)), {})[host] = Route(host, pod, pair)
        return out

    def pair_for(self, pod: Obj, host: str) -> Pair | None:
        """The key pair ``pod`` serves for ``host``: a component's in-memory one, else from its mounted Secrets
        (one covering ``host``, else the first; none when it mounts no key pair)."""
        pairs: list[Pair] | None = None
        for component in self.components:
            pairs = component.pairs(pod)
            if pairs is not None:
                break
        if pairs is None:
            pairs = []
            ns = pod["metadata"]["namespace"]
            for volume in (pod.get("spec") or {}).get("volumes") or []:
                names = [volume["secret"].get("secretName")] if volume.get("secret") else [
                    (s.get("secret") or {}).get("name") for s in (volume.get("projected") or {}).get("sources") or []]
                for secret_name in filter(None, names):
                    pairs += self.secret_pairs(self.cache["secret"].items.get(f"{ns}/{secret_name}"))
        return next((p for p in pairs if p.covers(host)), pairs[0] if pairs else None)

    def secret_pairs(self, secret: Obj | None) -> list[Pair]:
        if secret is None:
            return []
        key, rv = Informer.key(secret), secret["metadata"].get("resourceVersion", "")
        if self._pairs.get(key, ("",))[0] != rv:
            self._pairs[key] = (rv, secret_pairs(secret))
        return self._pairs[key][1]

    def verdict(self, pod: Obj, path: str, request: Obj) -> Obj | None:
        for component in self.components:
            answer = component.verdict(pod, path, request)
            if answer is not None:
                return answer
        return None

    def apply(self, desired: dict[tuple[str, int], dict[str, Route]]) -> None:
        for key in sorted(set(self.listeners) - set(desired)):
            listener = self.listeners.pop(key)
            listener.stop()
            log(f"stop {listener.name}")
        for key, routes in sorted(desired.items()):
            listener = self.listeners.get(key)
            if listener is not None:
                if listener.update(routes):
                    log(f"reload {listener.name}: {listener.describe()}")
                continue
            listener = Listener(key[0], key[1], routes, self.verdict)
            try:
                listener.start()
            except OSError as exc:
                if self._refused.get(key) != str(exc):
                    log(f"cannot listen on {listener.name}: {exc}")
                self._refused[key] = str(exc)
                continue
            self._refused.pop(key, None)
            self.listeners[key] = listener
            log(f"listen {listener.name}: {listener.describe()}")

    def close(self) -> None:
        for listener in self.listeners.values():
            listener.stop()
            log(f"stop {listener.name}")
        self.listeners.clear()


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--pod-cidr", required=True, help="the cluster's pod range: only its addresses are served")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    responder = Responder(Kube(args.kubeconfig), ipaddress.ip_network(args.pod_cidr))
    try:
        responder.run()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        responder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
