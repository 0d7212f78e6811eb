"""Credentials the installer finds in the cluster are checked before they are kept. Each case plants one in the real
API server and reconciles: a weak or malformed one is refused (the module fails with a message naming the Secret and
the rule, and the Secret is left as it was) or, where upstream generated a new one anyway (webhook certificates),
replaced with a warning saying why; a good one is kept. The planted value is never in the log, the status or the
results."""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
from collections.abc import Iterator

import bcrypt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.engine.state import StateStore
from installer.modules import by_name
from installer.objects import certs
from installer.objects.core_secret import ADMIN_CLAIMS, jwt_hs256
from installer.settings import FIELD_MANAGER, MODULE_LABEL, NAMESPACE

from .conftest import Installer
from .test_core_parity import SA_TOKEN, makes_sa_token

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
CORE_SECRET = "kubesphere-secret"
WEBHOOK_CERT = by_name()["ks-core"].certificates[0].secret
USERS = "iam.kubesphere.io", "v1alpha2", "users"


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def secret_data(installer: Installer, name: str) -> dict[str, str]:
    data = client.CoreV1Api(installer.api).read_namespaced_secret(name, NAMESPACE).data or {}
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def rerun(installer: Installer, module: str = "ks-core") -> subprocess.CompletedProcess[str]:
    """A reconcile that runs ``module`` again, as on a cluster the installer meets for the first time."""
    StateStore(installer.api).forget(module)
    return installer.reconcile()


def shown(installer: Installer, proc: subprocess.CompletedProcess[str]) -> str:
    """Everything a user or a log collector sees: the log, the cc's status and every file of the results."""
    files = [p.read_bytes().decode(errors="replace") for p in installer.results.rglob("*") if p.is_file()]
    return "\n".join([proc.stderr, proc.stdout, json.dumps(installer.status()), *files])


def failed(installer: Installer, proc: subprocess.CompletedProcess[str], module: str, message: str) -> None:
    """The reconcile failed at ``module`` with ``message`` in its status and its log, and nothing crashed."""
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    status = installer.status()["modules"][module]
    assert status["phase"] == "Failed" and message in status["message"], status
    assert message in proc.stderr and "without a message" not in proc.stderr


@pytest.fixture
def core_secret(installer: Installer) -> Iterator[dict[str, str]]:
    """kubesphere-secret's data, restored after the test."""
    saved = client.CoreV1Api(installer.api).read_namespaced_secret(CORE_SECRET, NAMESPACE).data
    yield {k: base64.b64decode(v).decode() for k, v in saved.items()}
    client.CoreV1Api(installer.api).patch_namespaced_secret(CORE_SECRET, NAMESPACE, {"data": saved})


def test_a_short_jwt_key_is_refused_and_left_as_it_is(installer: Installer, core_secret: dict[str, str]) -> None:
    short = "shortKeyCanary17"
    client.CoreV1Api(installer.api).patch_namespaced_secret(CORE_SECRET, NAMESPACE, {"data": {"secret": b64(short)}})
    proc = rerun(installer)
    failed(installer, proc, "ks-core", f"Secret {NAMESPACE}/{CORE_SECRET}: the JWT signing key (key 'secret') is "
                                       "shorter than 32 characters; set authentication.jwtSecret in the cc")
    assert installer.status()["modules"]["ks-core"]["failedTask"] == "KubeSphere | Ensure kubesphere-secret and the " \
                                                                      "admin user"
    assert short not in shown(installer, proc) and b64(short) not in shown(installer, proc)
    assert secret_data(installer, CORE_SECRET) == {**core_secret, "secret": short}  # nothing replaced


def test_a_good_jwt_key_found_is_kept(installer: Installer, core_secret: dict[str, str]) -> None:
    key = "FoundKeyCanary-0123456789abcdefXYZ"
    client.CoreV1Api(installer.api).patch_namespaced_secret(CORE_SECRET, NAMESPACE, {"data": {"secret": b64(key)}})
    proc = rerun(installer)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = secret_data(installer, CORE_SECRET)
    assert data["secret"] == key and data["token"] == jwt_hs256(ADMIN_CLAIMS, key)  # kept, the token signed with it
    assert key not in shown(installer, proc)


@pytest.fixture
def no_admin(installer: Installer) -> Iterator[None]:
    """No admin User (as before a first install); the original one is put back afterwards."""
    saved = installer.custom.get_cluster_custom_object(*USERS, "admin")
    installer.custom.delete_cluster_custom_object(*USERS, "admin")
    yield
    try:
        installer.custom.delete_cluster_custom_object(*USERS, "admin")
    except ApiException as exc:
        if exc.status != 404:
            raise
    meta = saved["metadata"]
    body = {**saved, "metadata": {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}}
    # as the installer wrote it (its field manager), so a later uninstall takes it as the installer's
    installer.custom.create_cluster_custom_object(*USERS, body, field_manager=FIELD_MANAGER)


@pytest.mark.usefixtures("no_admin")
def test_the_specs_admin_password_wins_over_a_found_init_admin_password(
        installer: Installer, core_secret: dict[str, str]) -> None:
    planted, chosen = "Planted-Canary-Passw0rd", "Chosen-Canary-Passw0rd"
    core = client.CoreV1Api(installer.api)
    core.patch_namespaced_secret(CORE_SECRET, NAMESPACE, {"data": {"initAdminPassword": b64(planted)}})
    installer.apply_cc(authentication={"jwtSecret": "", "adminPassword": chosen})
    proc = rerun(installer)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Secret {NAMESPACE}/{CORE_SECRET}: initAdminPassword replaced by spec.authentication.adminPassword" \
        in proc.stderr
    user = installer.custom.get_cluster_custom_object(*USERS, "admin")
    assert bcrypt.checkpw(chosen.encode(), user["spec"]["password"].encode())
    assert secret_data(installer, CORE_SECRET)["initAdminPassword"] == chosen
    assert secret_data(installer, CORE_SECRET)["secret"] == core_secret["secret"]  # the key kept
    text = shown(installer, proc)
    assert planted not in text and chosen not in text


@pytest.mark.usefixtures("no_admin")
def test_a_weak_init_admin_password_found_is_refused(installer: Installer, core_secret: dict[str, str]) -> None:
    weak = "weakcanary"
    client.CoreV1Api(installer.api).patch_namespaced_secret(CORE_SECRET, NAMESPACE,
                                                            {"data": {"initAdminPassword": b64(weak)}})
    proc = rerun(installer)
    failed(installer, proc, "ks-core", f"Secret {NAMESPACE}/{CORE_SECRET}: initAdminPassword does not meet "
                                       "KubeSphere's password rule: it needs an uppercase letter, a digit")
    assert weak not in shown(installer, proc)
    with pytest.raises(ApiException):  # no admin made with it
        installer.custom.get_cluster_custom_object(*USERS, "admin")
    assert secret_data(installer, CORE_SECRET)["initAdminPassword"] == weak


@pytest.fixture
def planted_token(installer: Installer) -> Iterator[str]:
    """An Opaque kubesphere-sa-token holding someone's data (in place of ks-core's from Kubernetes 1.24); removed
    afterwards (ks-core makes its token again)."""
    core = client.CoreV1Api(installer.api)
    if makes_sa_token(installer):
        core.delete_namespaced_secret(SA_TOKEN, NAMESPACE)
    value = "opaque-token-canary-value"
    core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": SA_TOKEN}, "type": "Opaque",
                                              "stringData": {"token": value}})
    yield value
    core.delete_namespaced_secret(SA_TOKEN, NAMESPACE)


@pytest.mark.versions
def test_an_opaque_service_account_token_is_refused_not_deleted(installer: Installer, planted_token: str) -> None:
    """From 1.24 ks-core makes kubesphere-sa-token, so one of another type stops it; before, ks-core makes no
    Secret of that name (the token controller makes the account's token), so the one found is someone else's and
    the reconcile leaves it alone."""
    proc = rerun(installer)
    if makes_sa_token(installer):
        failed(installer, proc, "ks-core", f"Secret {NAMESPACE}/{SA_TOKEN}: its type is 'Opaque', not kubernetes.io/"
                                           "service-account-token (the token of ServiceAccount kubesphere)")
        assert installer.status()["modules"]["ks-core"]["failedTask"] == \
            "KubeSphere | Check the token Secret and the webhook configurations found in the cluster"
    else:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert installer.status()["modules"]["ks-core"]["phase"] == "Installed"
        assert SA_TOKEN not in proc.stderr
    token = client.CoreV1Api(installer.api).read_namespaced_secret(SA_TOKEN, NAMESPACE)
    assert token.type == "Opaque" and base64.b64decode(token.data["token"]).decode() == planted_token  # kept
    assert MODULE_LABEL not in (token.metadata.labels or {})
    assert planted_token not in shown(installer, proc)


@pytest.fixture
def url_webhook(installer: Installer) -> Iterator[str]:
    """ks-core's users webhook pointed at a URL; the configuration is removed afterwards (ks-core registers it)."""
    admission = client.AdmissionregistrationV1Api(installer.api)
    name = "users.iam.kubesphere.io"
    body = admission.read_validating_webhook_configuration(name)
    body.webhooks[0].client_config.service = None
    body.webhooks[0].client_config.url = "https://webhook.invalid/validate"
    admission.replace_validating_webhook_configuration(name, body)
    yield name
    admission.delete_validating_webhook_configuration(name)


def test_a_webhook_that_calls_a_url_is_named(installer: Installer, url_webhook: str) -> None:
    proc = rerun(installer)
    failed(installer, proc, "ks-core", f"ValidatingWebhookConfiguration {url_webhook}: webhook '{url_webhook}' calls "
                                       "a URL where the installer registers Service kubesphere-system/"
                                       "ks-controller-manager; delete the configuration")
    live = client.AdmissionregistrationV1Api(installer.api).read_validating_webhook_configuration(url_webhook)
    assert live.webhooks[0].client_config.url == "https://webhook.invalid/validate"  # left as it was


def weak_certificate(names: list[str]) -> dict[str, bytes]:
    """A 1024-bit CA valid for 100 years and a certificate it signed for ``names``."""
    ca_key, key = rsa.generate_private_key(65537, 1024), rsa.generate_private_key(65537, 2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "planted-ca")])
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)

    def build(public: rsa.RSAPublicKey, ca: bool) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(public)
                .serial_number(x509.random_serial_number()).not_valid_before(start)
                .not_valid_after(start + dt.timedelta(days=36500))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))

    ca = build(ca_key.public_key(), True).sign(ca_key, hashes.SHA256())
    cert = build(key.public_key(), False).add_extension(
        x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False).sign(ca_key, hashes.SHA256())
    pem = serialization.Encoding.PEM
    return {"ca.crt": ca.public_bytes(pem), "tls.crt": cert.public_bytes(pem),
            "tls.key": key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,
                                         serialization.NoEncryption())}


def plant_certificate(installer: Installer, data: dict[str, bytes]) -> None:
    client.CoreV1Api(installer.api).patch_namespaced_secret(WEBHOOK_CERT, NAMESPACE,
                                                            {"data": {k: b64(v) for k, v in data.items()}})


def test_a_weak_webhook_certificate_is_replaced_saying_why(installer: Installer) -> None:
    weak = weak_certificate(certs.dns_names("ks-controller-manager", NAMESPACE))
    plant_certificate(installer, weak)
    proc = rerun(installer)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (f"[ks-core] Secret {NAMESPACE}/{WEBHOOK_CERT}: replaced the certificate found there: the CA certificate "
            "has a 1024-bit RSA key (at least 2048)") in proc.stderr
    now = {k: v.encode() for k, v in secret_data(installer, WEBHOOK_CERT).items()}
    assert now["ca.crt"] != weak["ca.crt"] and certs.problem(now, certs.required_names("ks-controller-manager",
                                                                                         NAMESPACE)) is None
    bundle = client.AdmissionregistrationV1Api(installer.api).read_validating_webhook_configuration(
        "users.iam.kubesphere.io").webhooks[0].client_config.ca_bundle
    assert base64.b64decode(bundle) == now["ca.crt"]  # the webhooks trust the new CA
    key = weak["tls.key"].decode().splitlines()[1]
    assert key not in shown(installer, proc) and now["tls.key"].decode().splitlines()[1] not in shown(installer, proc)


def test_a_good_webhook_certificate_found_is_kept(installer: Installer) -> None:
    good = certs.generate(certs.dns_names("ks-controller-manager", NAMESPACE))
    plant_certificate(installer, good)
    proc = rerun(installer)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {k: v.encode() for k, v in secret_data(installer, WEBHOOK_CERT).items()} == good
    assert "replaced the certificate" not in proc.stderr


@pytest.fixture
def blank_redis_password(installer: Installer) -> Iterator[None]:
    """redis-secret with a blank password in place of the one an earlier redis install kept (put back after)."""
    core = client.CoreV1Api(installer.api)
    try:
        kept = core.read_namespaced_secret("redis-secret", NAMESPACE)
        core.delete_namespaced_secret("redis-secret", NAMESPACE)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        kept = None
    core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": "redis-secret"}, "data": {"auth": ""}})
    yield
    core.delete_namespaced_secret("redis-secret", NAMESPACE)
    if kept is not None:
        core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": "redis-secret", "labels": kept.metadata.labels,
                                                               "annotations": kept.metadata.annotations},
                                                  "type": kept.type, "data": kept.data})


@pytest.mark.usefixtures("blank_redis_password")
def test_an_empty_redis_password_is_refused(installer: Installer) -> None:
    installer.apply_cc(common__redis__enabled=True)
    message = (f"Secret {NAMESPACE}/redis-secret: key 'auth' is empty; put the password in it, or delete the key "
               "to have one generated")
    # Previewed by the run's own decision: the plan names the refusal (kubectl diff's exit code for an error).
    shown = installer.cli("plan", "--objects", "--module", "redis")
    assert shown.returncode == 2 and "Traceback" not in shown.stderr, shown.stderr[-2000:]
    assert f"! Secret {NAMESPACE}/redis-secret ({message}" in shown.stdout, shown.stdout
    proc = installer.reconcile()
    failed(installer, proc, "redis", message)
    secret = client.CoreV1Api(installer.api).read_namespaced_secret("redis-secret", NAMESPACE)
    assert secret.data in (None, {}, {"auth": ""})  # left as it was
    assert not client.AppsV1Api(installer.api).list_namespaced_deployment(NAMESPACE,
                                                                          field_selector="metadata.name=redis").items
