"""Serving certificates of admission webhooks (and other in-cluster TLS servers), kept in Secrets.

Each module's role names its Secret, the CA's and the certificate's common names and the Secret's keys (the
registry's ``Module.certificates``, handed to the role: :class:`Layout`); ks-controller-manager's Secret
``ks-controller-manager-webhook-cert`` holds ``ca.crt``, ``tls.crt`` and ``tls.key`` (PEM), as upstream's chart made
it: a CA of its own and a certificate for the webhook Service's DNS names signed by it. It is generated once and
kept on later runs; it is replaced (upstream's charts made a new one on every upgrade) when it is missing,
unreadable, does not match the Service's names or its key, is not signed by its CA (or that is no CA), has a key
weaker than RSA 2048 or EC 256 bits or a SHA-1 or MD5 signature, is not valid yet, is valid for longer than the
layout allows (what its chart generated), either certificate expires within the renewal window, or its key pair is
one an upstream chart published (:data:`PUBLISHED_KEYS`). A Secret of a type other than Opaque or kubernetes.io/tls
is refused (:class:`~installer.objects.credentials.Refused`). The CA certificate (public) goes into every webhook's
``caBundle``; the key never leaves the Secret and nothing here logs or returns it.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from installer.objects.credentials import Refused, public_key_problem, type_problem
from installer.objects.field_takeover import take_over
from installer.objects.foreign import guard
from installer.objects.webhook_trust import trust_new_ca
from installer.settings import FIELD_MANAGER, MANAGED_BY, MODULE_LABEL

VALIDITY = dt.timedelta(days=3650)
RENEW_BEFORE = dt.timedelta(days=30)
#: The longest validity a found certificate may have: upstream's charts made theirs for 3650 days (one day of slack).
MAX_VALIDITY = VALIDITY + dt.timedelta(days=1)
#: How far in the future a found certificate's start may be (clock skew between its maker and here).
SKEW = dt.timedelta(minutes=5)
TYPES = ("Opaque", "kubernetes.io/tls")
WEAK_HASHES = (hashes.SHA1, hashes.MD5)
KEYS = ("ca.crt", "tls.crt", "tls.key")
#: SHA-256 of the public keys (SubjectPublicKeyInfo, DER) of serving certificates whose private key upstream's charts
#: published: a Secret holding one is replaced, whatever its validity, since anyone can serve or read its webhook.
PUBLISHED_KEYS = {
    # notification-manager chart 1.4.0 (KubeSphere 3.2/3.3): templates/tls.yaml, CN notification-manager-webhook,
    # valid 2021-07-27 to 2121-07-03; v3.4.1's chart still ships it beside the one it generates.
    "47225e4effb165fc7ad69e68543110182929d61505aa306f8eef57362b214ef5",
    # ks-devops chart 0.2.2 (v3.4.1), subchart s2i: values.yaml s2ioperator.secret, CN webhook-server-service.
    "7a399012dda9a21ab8a94a1581963a3d1942094d80fd5ba5b39f436a080fe501",
}


@dataclass(frozen=True)
class Layout:
    """Where a certificate lives: the Secret, the CA's and the certificate's common names, and the Secret's keys
    for the CA certificate, the certificate and its key (in that order)."""

    secret: str
    ca_name: str
    cert_name: str
    keys: tuple[str, str, str] = KEYS
    type: str = "Opaque"
    max_validity: dt.timedelta = MAX_VALIDITY
    annotations: tuple[tuple[str, str], ...] = ()
    """The Secret's per-object policy (installer.settings.PRUNE_ANNOTATION), set on it, a found one too."""

    def to_secret(self, data: dict[str, bytes]) -> dict[str, str]:
        """The Secret's data of ``data`` (a CA certificate it lacks stays out)."""
        return {k: base64.b64encode(data[c]).decode() for c, k in zip(KEYS, self.keys, strict=True) if c in data}

    def from_secret(self, data: dict[str, str]) -> dict[str, bytes]:
        return {c: base64.b64decode(data[k]) for c, k in zip(KEYS, self.keys, strict=True) if data.get(k)}


def dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server uses to reach a Service."""
    return [f"{service}.{namespace}", f"{service}.{namespace}.svc"]


def required_names(service: str, namespace: str) -> list[str]:
    """The name a kept certificate must cover: the one the API server dials a webhook Service by (upstream's charts
    made certificates for it alone)."""
    return [f"{service}.{namespace}.svc"]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _key_usage(cert_sign: bool) -> x509.KeyUsage:
    """Signature and key encipherment; certificate signing for the CA only."""
    return x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=cert_sign,
                         content_commitment=False, data_encipherment=False, key_agreement=False, crl_sign=False,
                         encipher_only=False, decipher_only=False)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate(names: list[str], now: dt.datetime | None = None, validity: dt.timedelta = VALIDITY,
             ca_name: str = "ks-installer-ca", cert_name: str | None = None) -> dict[str, bytes]:
    """A new CA and a serving certificate for ``names`` signed by it: ``ca.crt``, ``tls.crt``, ``tls.key`` (PEM).
    ``cert_name``: the certificate's common name (default: the first of ``names``)."""
    cert_name = cert_name or names[0]
    now = now or _now()
    start, end = now - dt.timedelta(minutes=5), now + validity
    ca_key, key = _key(), _key()
    ca = (x509.CertificateBuilder().subject_name(_name(ca_name)).issuer_name(_name(ca_name))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(_key_usage(cert_sign=True), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(_name(cert_name)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(cert_sign=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "tls.crt": cert.public_bytes(serialization.Encoding.PEM),
        "tls.key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                     serialization.NoEncryption()),
    }


def problem(data: dict[str, bytes], names: list[str], now: dt.datetime | None = None,
            renew_before: dt.timedelta = RENEW_BEFORE, max_validity: dt.timedelta = MAX_VALIDITY) -> str | None:
    """Why ``data`` cannot be kept (a short reason without any secret value), or None when it is good. Without
    ``ca.crt`` (upstream's charts often kept only the certificate and key) the certificate alone is judged."""
    missing = [k for k in KEYS[1:] if not data.get(k)]
    if missing:
        return f"missing {', '.join(missing)}"
    try:
        bundle = x509.load_pem_x509_certificates(data["ca.crt"]) if data.get("ca.crt") else []
        cert = x509.load_pem_x509_certificate(data["tls.crt"])
        key = serialization.load_pem_private_key(data["tls.key"], password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return "unreadable certificate or key"
    now = now or _now()
    found = [("the CA certificate" if len(bundle) == 1 else f"CA certificate {i + 1} of {len(bundle)}", ca)
             for i, ca in enumerate(bundle)]
    for what, certificate in [*found, ("the certificate", cert)]:
        if reason := certificate_problem(certificate, what, now, max_validity):
            return reason
    if len(bundle) > 1:  # the whole file becomes the webhooks' caBundle: each CA in it could sign for the Service
        return f"the CA file holds {len(bundle)} certificates (one CA expected)"
    ca = bundle[0] if bundle else None
    if ca is not None and not is_ca(ca):
        return "the CA certificate is not a CA"
    if ca is not None and not issued_by(cert, ca):
        return "certificate not signed by its CA"
    if key.public_key().public_bytes(*SPKI) != cert.public_key().public_bytes(*SPKI):
        return "key does not match the certificate"
    if hashlib.sha256(cert.public_key().public_bytes(*SPKI)).hexdigest() in PUBLISHED_KEYS:
        return "its key pair is the one upstream's chart published (the private key is public)"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "certificate has no DNS names"
    if not set(names) <= set(san.get_values_for_type(x509.DNSName)):
        return "certificate does not cover the Service's DNS names"
    if not serves(cert):
        return "the certificate is not for TLS servers (extended key usage)"
    if min([cert.not_valid_after_utc, *([ca.not_valid_after_utc] if ca else [])]) <= now + renew_before:
        return "expires soon"
    return None


SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def certificate_problem(cert: x509.Certificate, what: str, now: dt.datetime, max_validity: dt.timedelta) -> str | None:
    """Why one certificate is too weak to keep: its key, its signature's hash, or its validity."""
    if reason := public_key_problem(cert.public_key(), what):
        return reason
    try:
        digest = cert.signature_hash_algorithm
    except UnsupportedAlgorithm:
        return f"{what} has a signature of an unknown algorithm"
    if isinstance(digest, WEAK_HASHES):
        return f"{what} is signed with {digest.name.upper()}"
    if cert.not_valid_before_utc > now + SKEW:
        return f"{what} is not valid before {cert.not_valid_before_utc:%Y-%m-%d}"
    if cert.not_valid_after_utc - cert.not_valid_before_utc > max_validity:
        days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
        return f"{what} is valid for {days} days (at most {max_validity.days})"
    return None


def is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def serves(cert: x509.Certificate) -> bool:
    """Whether a TLS client accepts ``cert`` for a server: no extended key usage, or one with serverAuth."""
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return ExtendedKeyUsageOID.SERVER_AUTH in usages or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usages


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def webhook_ca(api: client.ApiClient, namespace: str, service: str, cert_pem: bytes) -> bytes | None:
    """The CA certificate (PEM) that issued ``cert_pem``, found in the ``caBundle`` of an admission webhook served
    by the Service: where the original installer's chart put the CA whose key it did not keep."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    admission = client.AdmissionregistrationV1Api(api)
    configs = [*admission.list_validating_webhook_configuration().items,
               *admission.list_mutating_webhook_configuration().items]
    for config in configs:
        for hook in config.webhooks or []:
            ref = hook.client_config.service
            if ref is None or (ref.name, ref.namespace) != (service, namespace) or not hook.client_config.ca_bundle:
                continue
            try:
                cas = x509.load_pem_x509_certificates(base64.b64decode(hook.client_config.ca_bundle))
            except ValueError:
                continue
            for ca in cas:
                if issued_by(cert, ca):
                    return ca.public_bytes(serialization.Encoding.PEM)
    return None


def trusted_bundle(api: client.ApiClient, namespace: str, service: str, data: dict[str, bytes]) -> bytes:
    """What the webhooks' ``caBundle`` holds for a certificate that is kept: its CA (``ca.crt``, else the one found
    by :func:`webhook_ca`), else the certificate itself (the API server trusts a certificate found in the bundle)."""
    return data.get("ca.crt") or webhook_ca(api, namespace, service, data["tls.crt"]) or data["tls.crt"]




@dataclass
class CertOutcome:
    """What ensure did; ``ca_bundle`` is the CA certificate (base64 PEM) for the webhooks' caBundle; ``facts`` what
    the module's record keeps of the Secret ([UID, guard, :func:`fingerprint`])."""

    changed: bool
    reason: str
    ca_bundle: str
    note: str = ""
    facts: list[str] | None = None


def fingerprint(data: dict[str, bytes]) -> str:
    """What the installer records of a certificate it made or kept: ``cert:`` and the SHA-256 of the CA file and the
    certificate as found (public data only)."""
    digest = hashlib.sha256()
    for key in KEYS[:2]:
        digest.update(hashlib.sha256(data.get(key) or b"").digest())
    return f"cert:{digest.hexdigest()}"


NOT_RECORDED = "not the certificate the installer made or took over (its record names another)"


def judge(live: dict[str, Any], layout: Layout, service: str, namespace: str,
          renew_before: dt.timedelta = RENEW_BEFORE, recorded: str | None = None) -> str | None:
    """Why the found Secret ``live`` (``{}``: none) is to be replaced (None: kept); :class:`Refused` when it cannot be:
    a type other than Opaque or kubernetes.io/tls (ServiceAccount token Secrets get their data rewritten).
    ``recorded``: the :func:`fingerprint` the module's record holds (None: no record of it, as at a first install or
    a takeover, where a good certificate is kept and recorded): any other certificate is replaced."""
    if not live:
        return "missing"
    if rule := type_problem(live.get("type"), TYPES):
        raise Refused(namespace, layout.secret, rule, "its type cannot change in place: delete it once its data is "
                      "saved, and the installer generates a new certificate")
    try:
        current = layout.from_secret(live.get("data") or {})
    except ValueError:
        return "unreadable certificate or key"
    reason = problem(current, required_names(service, namespace), renew_before=renew_before,
                     max_validity=layout.max_validity)
    if reason is None and recorded is not None and fingerprint(current) != recorded:
        return NOT_RECORDED
    return reason


def ensure_webhook_cert(api: client.ApiClient, namespace: str, module: str, service: str,
                        *, layout: Layout, renew_before: dt.timedelta = RENEW_BEFORE,
                        recorded: str | None = None) -> CertOutcome:
    """Create the Secret, keep it when it is good (and the one ``recorded``: see :func:`judge`), replace it when
    :func:`judge` says so. A kept Secret without the CA certificate stays so; the webhooks trust what
    :func:`trusted_bundle` says. A certificate found and replaced is written only once every webhook its Service
    serves trusts the new CA beside the old (installer.objects.webhook_trust): no call through them fails, whichever
    of the two their server serves meanwhile."""
    secrets = DynamicClient(api).resources.get(api_version="v1", kind="Secret")
    names = dns_names(service, namespace)
    try:
        live = secrets.get(name=layout.secret, namespace=namespace).to_dict()
    except NotFoundError:
        live = {}
    reason = judge(live, layout, service, namespace, renew_before, recorded)
    current = layout.from_secret(live.get("data") or {}) if reason is None else {}
    labels = (live.get("metadata") or {}).get("labels") or {}
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    wanted = {**MANAGED_BY, MODULE_LABEL: module}
    if reason is None and wanted.items() <= labels.items() and set(layout.annotations) <= annotations.items():
        return CertOutcome(False, "kept", base64.b64encode(trusted_bundle(api, namespace, service, current)).decode(),
                           facts=[str(live["metadata"].get("uid") or ""), guard(live), fingerprint(current)])
    data = current if reason is None else generate(names, ca_name=layout.ca_name, cert_name=layout.cert_name)
    if live and reason is not None:
        trust_new_ca(api, namespace, service, data["ca.crt"])
    if live:  # made by the original installer (or by hand): its fields (other keys too) become the installer's
        take_over(secrets, live["metadata"], "v1")
    body = {"apiVersion": "v1", "kind": "Secret", "type": live.get("type") or layout.type,
            "metadata": {"name": layout.secret, "namespace": namespace, "labels": wanted,
                         **({"annotations": dict(layout.annotations)} if layout.annotations else {})},
            "data": {**(live.get("data") or {}), **layout.to_secret(data)}}
    after = secrets.server_side_apply(body=body, name=layout.secret, namespace=namespace,
                                      field_manager=FIELD_MANAGER, force_conflicts=True).to_dict()
    bundle = trusted_bundle(api, namespace, service, data) if reason is None else data["ca.crt"]
    outcome = CertOutcome(True, reason or "labelled", base64.b64encode(bundle).decode(),
                          facts=[str(after["metadata"].get("uid") or ""), guard(after), fingerprint(data)])
    if reason not in (None, "missing"):
        outcome.note = f"Secret {namespace}/{layout.secret}: replaced the certificate found there: {reason}"
    return outcome
