"""The webhook serving certificate of ks-controller-manager: generated once, kept, renewed near expiry."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes.dynamic.exceptions import NotFoundError

from installer.modules import by_name
from installer.objects import certs

NAMES = certs.dns_names("ks-controller-manager", "kubesphere-system")
#: ks-controller-manager's certificate as the registry hands it to ks-core's role.
CORE = by_name()["ks-core"].certificates[0].layout()


@pytest.fixture(scope="module")
def data() -> dict[str, bytes]:
    return certs.generate(NAMES)


def test_ca_verifies_the_serving_certificate(data: dict[str, bytes], tmp_path: Any) -> None:
    assert NAMES == ["ks-controller-manager.kubesphere-system", "ks-controller-manager.kubesphere-system.svc"]
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == NAMES
    assert cert.not_valid_after_utc - cert.not_valid_before_utc > dt.timedelta(days=3649)
    # What the API server does: TLS verification of the Service's DNS name against the caBundle.
    (tmp_path / "ca.pem").write_bytes(data["ca.crt"])
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    (tmp_path / "tls.pem").write_bytes(data["tls.crt"] + data["tls.key"])
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(tmp_path / "tls.pem"))
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client = ctx.wrap_bio(client_in, client_out, server_hostname="ks-controller-manager.kubesphere-system.svc")
    peer = server.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):  # drive the handshake through memory
        for side in (client, peer):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    assert client.getpeercert()["subjectAltName"] == tuple(("DNS", n) for n in NAMES)


def test_problem(data: dict[str, bytes]) -> None:
    assert certs.problem(data, NAMES) is None
    assert certs.problem({}, NAMES) == "missing tls.crt, tls.key"
    # Without its CA (upstream's charts kept only the certificate and key), the certificate alone is judged.
    assert certs.problem({k: v for k, v in data.items() if k != "ca.crt"}, NAMES) is None
    assert certs.problem({**data, "tls.crt": b"junk"}, NAMES) == "unreadable certificate or key"
    other = certs.generate(NAMES)
    assert certs.problem({**data, "ca.crt": other["ca.crt"]}, NAMES) == "certificate not signed by its CA"
    assert certs.problem({**data, "tls.key": other["tls.key"]}, NAMES) == "key does not match the certificate"
    assert certs.problem(data, [*NAMES, "ks-controller-manager.kubesphere-system.svc.cluster.local"]) == \
        "certificate does not cover the Service's DNS names"
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=3650 - 10)
    assert certs.problem(data, NAMES, now=later) == "expires soon"  # within the 30-day renewal window
    assert certs.problem(data, NAMES, now=later, renew_before=dt.timedelta(days=5)) is None


class FakeSecrets:
    """The Secret API of a DynamicClient, in memory."""

    def __init__(self) -> None:
        self.stored: dict[str, Any] | None = None
        self.applies = 0

    def get(self, name: str, namespace: str) -> Any:
        if self.stored is None:
            raise NotFoundError(type("E", (), {"status": 404, "reason": "NotFound", "body": "", "headers": {}})())
        stored = self.stored
        return type("Live", (), {"to_dict": lambda _self: stored})()

    def server_side_apply(self, body: dict[str, Any], **_: Any) -> Any:
        self.stored, self.applies = body, self.applies + 1
        return type("Live", (), {"to_dict": lambda _self: body})()


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> FakeSecrets:
    fake = FakeSecrets()
    resources = type("R", (), {"get": lambda _self, **_: fake})()
    monkeypatch.setattr(certs, "DynamicClient", lambda _api: type("D", (), {"resources": resources})())
    monkeypatch.setattr(certs, "trust_new_ca", lambda *_: [])  # no webhook configurations here (test_webhook_trust)
    return fake


def _stored(fake: FakeSecrets) -> dict[str, bytes]:
    assert fake.stored is not None
    return {k: base64.b64decode(v) for k, v in fake.stored["data"].items()}


def test_generated_once_then_kept(secrets: FakeSecrets) -> None:
    first = certs.ensure_webhook_cert(None, "kubesphere-system", "ks-core", "ks-controller-manager", layout=CORE)  # type: ignore[arg-type]
    assert first.changed and first.reason == "missing" and secrets.applies == 1
    assert secrets.stored is not None
    assert secrets.stored["metadata"]["labels"]["installer.kubesphere.io/module"] == "ks-core"
    data = _stored(secrets)
    assert base64.b64decode(first.ca_bundle) == data["ca.crt"]
    again = certs.ensure_webhook_cert(None, "kubesphere-system", "ks-core", "ks-controller-manager", layout=CORE)  # type: ignore[arg-type]
    assert not again.changed and again.reason == "kept" and again.ca_bundle == first.ca_bundle
    assert secrets.applies == 1 and _stored(secrets) == data


def test_renewed_before_expiry(secrets: FakeSecrets) -> None:
    old = certs.generate(NAMES, validity=dt.timedelta(days=20))
    secrets.stored = {"metadata": {"labels": {"installer.kubesphere.io/module": "ks-core",
                                              "app.kubernetes.io/managed-by": "ks-installer"}},
                      "data": {k: base64.b64encode(v).decode() for k, v in old.items()}}
    outcome = certs.ensure_webhook_cert(None, "kubesphere-system", "ks-core", "ks-controller-manager", layout=CORE)  # type: ignore[arg-type]
    assert outcome.changed and outcome.reason == "expires soon"
    new = _stored(secrets)
    assert new["ca.crt"] != old["ca.crt"] and certs.problem(new, NAMES) is None
    assert base64.b64decode(outcome.ca_bundle) == new["ca.crt"]
    key = serialization.load_pem_private_key(new["tls.key"], password=None)
    assert key.key_size == 2048  # type: ignore[union-attr]


def test_a_layout_names_its_own_secret_keys_and_common_names() -> None:
    from cryptography import x509

    from installer.objects.certs import Layout, generate, problem

    layout = Layout("cloudcore", "cloudcore-ca", "cloudcore", ("streamCA.crt", "stream.crt", "stream.key"))
    data = generate(["cloudcore.kubeedge", "cloudcore.kubeedge.svc"], ca_name=layout.ca_name,
                    cert_name=layout.cert_name)
    stored = layout.to_secret(data)
    assert sorted(stored) == ["stream.crt", "stream.key", "streamCA.crt"]
    back = layout.from_secret(stored)
    assert problem(back, ["cloudcore.kubeedge.svc"]) is None
    ca = x509.load_pem_x509_certificate(back["ca.crt"])
    assert ca.subject.rfc4514_string() == "CN=cloudcore-ca"


def test_kept_without_its_ca(secrets: FakeSecrets, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Secret with only tls.crt and tls.key (notification-manager's chart) is kept as it is: the webhooks trust the
    CA found in the caBundle of a webhook of the Service, or else the certificate itself; no CA is generated."""
    made = certs.generate(["notification-manager-webhook.kubesphere-monitoring-system.svc"])
    secrets.stored = {"type": "kubernetes.io/tls", "metadata": {"labels": {}},
                      "data": {k: base64.b64encode(made[k]).decode() for k in ("tls.crt", "tls.key")}}
    found: list[bytes | None] = [None]
    monkeypatch.setattr(certs, "webhook_ca", lambda *_: found[0])
    args = ("kubesphere-monitoring-system", "monitoring", "notification-manager-webhook")
    layout = certs.Layout("notification-manager-webhook-server-cert", "webhook-ca", "notification-manager-webhook",
                          type="kubernetes.io/tls")
    outcome = certs.ensure_webhook_cert(None, *args, layout=layout)  # type: ignore[arg-type]
    assert outcome.reason == "labelled" and base64.b64decode(outcome.ca_bundle) == made["tls.crt"]
    assert _stored(secrets) == {"tls.crt": made["tls.crt"], "tls.key": made["tls.key"]}
    found[0] = made["ca.crt"]
    again = certs.ensure_webhook_cert(None, *args, layout=layout)  # type: ignore[arg-type]
    assert again.reason == "kept" and not again.changed and base64.b64decode(again.ca_bundle) == made["ca.crt"]
    assert _stored(secrets) == {"tls.crt": made["tls.crt"], "tls.key": made["tls.key"]}


def test_webhook_ca_is_the_issuer_in_a_bundle_of_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    made = certs.generate(["svc.ns.svc"])
    other = certs.generate(["svc.ns.svc"])
    bundle = base64.b64encode(other["ca.crt"] + made["ca.crt"]).decode()

    def hook(service: str, namespace: str) -> Any:
        ref = type("S", (), {"name": service, "namespace": namespace})()
        return type("W", (), {"client_config": type("C", (), {"service": ref, "ca_bundle": bundle})()})()

    configs = [type("V", (), {"webhooks": [hook("other", "ns"), hook("svc", "ns")]})()]
    api = type("A", (), {"list_validating_webhook_configuration": lambda _s: type("L", (), {"items": configs})(),
                         "list_mutating_webhook_configuration": lambda _s: type("L", (), {"items": []})()})()
    monkeypatch.setattr(certs.client, "AdmissionregistrationV1Api", lambda _api: api)
    assert certs.webhook_ca(None, "ns", "svc", made["tls.crt"]) == made["ca.crt"]  # type: ignore[arg-type]
    assert certs.webhook_ca(None, "ns", "svc", certs.generate(["x"])["tls.crt"]) is None  # type: ignore[arg-type]


def planted(names: list[str], ca_key: Any = None, key: Any = None, days: int = 365, start_in: int = 0,
            ca_is_ca: bool = True) -> dict[str, bytes]:
    """A CA and a serving certificate as someone else may have made them (key sizes and validity chosen)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    ca_key = ca_key or rsa.generate_private_key(65537, 2048)
    key = key or rsa.generate_private_key(65537, 2048)
    start = dt.datetime.now(dt.UTC) + dt.timedelta(days=start_in) - dt.timedelta(minutes=1)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "planted")])

    def build(public: Any, ca: bool) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(public)
                .serial_number(x509.random_serial_number()).not_valid_before(start)
                .not_valid_after(start + dt.timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))

    signing = hashes.SHA256()
    ca = build(ca_key.public_key(), ca_is_ca).sign(ca_key, signing)
    cert = build(key.public_key(), False).add_extension(
        x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False).sign(ca_key, signing)
    pem = serialization.Encoding.PEM
    return {"ca.crt": ca.public_bytes(pem), "tls.crt": cert.public_bytes(pem),
            "tls.key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())}


def test_weak_or_odd_certificates_found_are_replaced() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    assert certs.problem(planted(NAMES), NAMES) is None
    assert certs.problem(planted(NAMES, key=ec.generate_private_key(ec.SECP256R1())), NAMES) is None
    cases = {
        "the CA certificate has a 1024-bit RSA key (at least 2048)":
            planted(NAMES, ca_key=rsa.generate_private_key(65537, 1024), days=36500),
        "the certificate has a 1024-bit RSA key (at least 2048)":
            planted(NAMES, key=rsa.generate_private_key(65537, 1024)),
        "the certificate has a 192-bit EC key (at least 256)":
            planted(NAMES, key=ec.generate_private_key(ec.SECP192R1())),
        "the CA certificate is valid for 36500 days (at most 3651)": planted(NAMES, days=36500),
        "the CA certificate is not a CA": planted(NAMES, ca_is_ca=False),
    }
    for reason, data in cases.items():
        assert certs.problem(data, NAMES) == reason
    later = planted(NAMES, start_in=2)
    assert certs.problem(later, NAMES) == f"the CA certificate is not valid before {later_start(later)}"
    # notification-manager's chart made its certificate for 36500 days: its layout allows that much, not more.
    assert certs.problem(planted(NAMES, days=36500), NAMES, max_validity=dt.timedelta(days=36501)) is None


def later_start(data: dict[str, bytes]) -> str:
    return f"{x509.load_pem_x509_certificate(data['ca.crt']).not_valid_before_utc:%Y-%m-%d}"


def test_a_replaced_certificate_says_why_and_a_foreign_type_is_refused(secrets: FakeSecrets) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    from installer.objects.credentials import Refused

    weak = planted(NAMES, ca_key=rsa.generate_private_key(65537, 1024))
    secrets.stored = {"type": "Opaque", "metadata": {"labels": {}},
                      "data": {k: base64.b64encode(v).decode() for k, v in weak.items()}}
    outcome = certs.ensure_webhook_cert(None, "kubesphere-system", "ks-core", "ks-controller-manager", layout=CORE)  # type: ignore[arg-type]
    assert outcome.changed and outcome.note == (
        "Secret kubesphere-system/ks-controller-manager-webhook-cert: replaced the certificate found there: the CA "
        "certificate has a 1024-bit RSA key (at least 2048)")
    assert _stored(secrets)["ca.crt"] != weak["ca.crt"] and certs.problem(_stored(secrets), NAMES) is None
    secrets.stored = {"type": "kubernetes.io/service-account-token", "metadata": {"labels": {}}, "data": {}}
    with pytest.raises(Refused) as refused:
        certs.ensure_webhook_cert(None, "kubesphere-system", "ks-core", "ks-controller-manager", layout=CORE)  # type: ignore[arg-type]
    assert str(refused.value).startswith("Secret kubesphere-system/ks-controller-manager-webhook-cert: its type is "
                                         "'kubernetes.io/service-account-token', not Opaque or kubernetes.io/tls; ")
    assert secrets.stored["type"] == "kubernetes.io/service-account-token"  # left as it is


def test_a_key_pair_an_upstream_chart_published_is_replaced() -> None:
    """notification-manager 1.4.0's chart (KubeSphere 3.3.2; its Secret as committed in the v3.3.2 fixture rendered
    from the tag) shipped its webhook's key pair: valid for a century, matching its names, and still replaced, since
    its private key is public. A certificate of our own for the same names is kept."""
    fixture = Path(__file__).resolve().parents[1] / "parity" / "upstream-v332" / "default" / "monitoring.json"
    secret = next(o for o in json.loads(fixture.read_text())
                  if o["kind"] == "Secret" and o["metadata"]["name"] == "notification-manager-webhook-server-cert")
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    names = ["notification-manager-webhook.kubesphere-monitoring-system.svc"]
    now = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
    century = dt.timedelta(days=36501)
    assert certs.problem(data, names, now, max_validity=century) == (
        "its key pair is the one upstream's chart published (the private key is public)")
    own = certs.generate(names, now=now, validity=dt.timedelta(days=36500))
    assert certs.problem({"tls.crt": own["tls.crt"], "tls.key": own["tls.key"]}, names, now,
                         max_validity=century) is None


def test_every_certificate_of_a_ca_file_is_judged_and_one_ca_is_expected(data: dict[str, bytes]) -> None:
    """The whole CA file becomes the webhooks' caBundle: a weak CA appended after the good one, or a second good
    CA (anyone's, able to sign for the Service), has the certificate replaced."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    weak = planted(NAMES, ca_key=rsa.generate_private_key(65537, 1024), days=36500)["ca.crt"]
    assert certs.problem({**data, "ca.crt": data["ca.crt"] + weak}, NAMES) == \
        "CA certificate 2 of 2 has a 1024-bit RSA key (at least 2048)"
    other = certs.generate(NAMES)["ca.crt"]
    assert certs.problem({**data, "ca.crt": data["ca.crt"] + other}, NAMES) == \
        "the CA file holds 2 certificates (one CA expected)"


def test_only_the_recorded_certificate_is_kept(secrets: FakeSecrets) -> None:
    """Once the module's record names its certificate, another one (a valid CA of someone else's, with the right
    names) is replaced with a warning; without a record (a first install, a takeover) a good one is kept."""
    def found(made: dict[str, bytes]) -> None:
        secrets.stored = {"metadata": {"uid": "u1", "labels": {"installer.kubesphere.io/module": "ks-core",
                                                               "app.kubernetes.io/managed-by": "ks-installer"}},
                          "data": {k: base64.b64encode(v).decode() for k, v in made.items()}}

    ours, theirs = certs.generate(NAMES), planted(NAMES)
    found(ours)
    kept = certs.ensure_webhook_cert(None, "kubesphere-system", "ks-core", "ks-controller-manager", layout=CORE)  # type: ignore[arg-type]
    assert not kept.changed and kept.facts is not None and kept.facts[2] == certs.fingerprint(ours)
    recorded = kept.facts[2]
    assert not certs.ensure_webhook_cert(None, "kubesphere-system", "ks-core", "ks-controller-manager", layout=CORE,  # type: ignore[arg-type]
                                         recorded=recorded).changed
    found(theirs)
    replaced = certs.ensure_webhook_cert(None, "kubesphere-system", "ks-core", "ks-controller-manager", layout=CORE,  # type: ignore[arg-type]
                                         recorded=recorded)
    assert replaced.changed and replaced.reason == certs.NOT_RECORDED
    assert replaced.note == ("Secret kubesphere-system/ks-controller-manager-webhook-cert: replaced the certificate "
                             f"found there: {certs.NOT_RECORDED}")
    new = _stored(secrets)
    assert new["ca.crt"] != theirs["ca.crt"] and replaced.facts is not None
    assert replaced.facts[2] == certs.fingerprint(new) != recorded
