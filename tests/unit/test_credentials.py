"""The checks of credentials found in the cluster: each names the rule, never the value."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa

from installer.objects import credentials
from installer.objects.credentials import Refused


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_type() -> None:
    assert credentials.type_problem(None, ("Opaque",)) is None  # the API's default
    assert credentials.type_problem("kubernetes.io/tls", ("Opaque", "kubernetes.io/tls")) is None
    assert credentials.type_problem("kubernetes.io/service-account-token", ("Opaque",)) == \
        "its type is 'kubernetes.io/service-account-token', not Opaque"
    forged = credentials.type_problem("x\n[error] forged", ("Opaque",))
    assert forged == "its type is 'x\\n[error] forged', not Opaque" and "\n" not in forged


def test_decoded_names_the_key_never_the_value() -> None:
    assert credentials.decoded("ns", "s", {"a": b64(b"text"), "b": ""}) == {"a": "text", "b": ""}
    for bad in (b64(b"\xff\xfe-not-utf8"), "***not base64***"):
        with pytest.raises(Refused) as refused:
            credentials.decoded("ns", "s", {"auth": bad})
        assert str(refused.value) == "Secret ns/s: key 'auth' is not UTF-8 text; put the value back as text or " \
                                     "delete the key"


def test_jwt_key_and_passwords() -> None:
    assert credentials.jwt_key_problem("a") == "the JWT signing key (key 'secret') is shorter than 32 characters"
    assert credentials.jwt_key_problem("x" * 31) is not None
    assert credentials.jwt_key_problem("0123456789abcdefghijklmnopqrstuv") is None


def test_a_jwt_key_of_the_right_length_is_still_refused_when_guessable() -> None:
    import secrets

    from installer.objects.core_secret import random_string

    what = "the JWT signing key (key 'secret')"
    assert credentials.jwt_key_problem("a" * 32) == f"{what} repeats a shorter pattern"
    assert credentials.jwt_key_problem("secret" * 6) == f"{what} repeats a shorter pattern"
    for blank in (" " * 32, "\u202e" * 32, "\x00" * 32, "k" * 31 + "\u2028", "good key with a space in it ok!!"):
        assert credentials.jwt_key_problem(blank) == f"{what} holds spaces, control or format characters"
    assert credentials.jwt_key_problem("a" * 31 + "b") == f"{what} is too predictable (about 6 bits; at least 88)"
    assert all(credentials.jwt_key_problem(random_string(32)) is None for _ in range(2000))  # what is generated
    assert all(credentials.jwt_key_problem(secrets.token_hex(16)) is None for _ in range(2000))  # openssl rand -hex 16
    assert credentials.nonempty_problem("auth", "") == "key 'auth' is empty"
    assert credentials.nonempty_problem("auth", " \n") == "key 'auth' is empty"
    assert credentials.nonempty_problem("auth", "a") is None
    assert credentials.admin_password_problem("P@88w0rd") is None
    assert credentials.admin_password_problem("password") == \
        "initAdminPassword does not meet KubeSphere's password rule: it needs an uppercase letter, a digit"


def test_service_account_token() -> None:
    named = {credentials.SA_ANNOTATION: "kubesphere"}
    assert credentials.service_account_token_problem(credentials.SA_TOKEN, named, "kubesphere") is None
    assert credentials.service_account_token_problem("Opaque", named, "kubesphere") == \
        "its type is 'Opaque', not kubernetes.io/service-account-token (the token of ServiceAccount kubesphere)"
    assert credentials.service_account_token_problem(None, named, "kubesphere") is not None  # Opaque by default
    assert credentials.service_account_token_problem(credentials.SA_TOKEN, {credentials.SA_ANNOTATION: "default"},
                                                     "kubesphere") == \
        "it is the token of ServiceAccount 'default', not kubesphere"


@pytest.mark.parametrize(("key", "problem"), [
    (rsa.generate_private_key(65537, 1024), "the CA has a 1024-bit RSA key (at least 2048)"),
    (rsa.generate_private_key(65537, 2048), None),
    (ec.generate_private_key(ec.SECP192R1()), "the CA has a 192-bit EC key (at least 256)"),
    (ec.generate_private_key(ec.SECP256R1()), None),
    (ed25519.Ed25519PrivateKey.generate(), None),
    (dsa.generate_private_key(2048), "the CA has a DSAPublicKey key (RSA or EC expected)"),
], ids=["rsa1024", "rsa2048", "ec192", "ec256", "ed25519", "dsa"])
def test_public_key_sizes(key: object, problem: str | None) -> None:
    assert credentials.public_key_problem(key.public_key(), "the CA") == problem  # type: ignore[attr-defined]


def test_webhook_that_calls_a_url() -> None:
    service = {"name": "ks-controller-manager", "namespace": "kubesphere-system", "path": "/v"}
    rendered = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "users.iam.kubesphere.io"},
                "webhooks": [{"name": "users.iam.kubesphere.io", "clientConfig": {"service": service}}]}
    live = {"webhooks": [{"name": "users.iam.kubesphere.io", "clientConfig": {"url": "https://x.invalid/v"}},
                         {"name": "someone-elses", "clientConfig": {"url": "https://y.invalid"}}]}
    assert credentials.webhook_url_problems(live, rendered) == [
        "ValidatingWebhookConfiguration users.iam.kubesphere.io: webhook 'users.iam.kubesphere.io' calls a URL "
        "where the installer registers Service kubesphere-system/ks-controller-manager; delete the configuration "
        "(kubectl delete validatingwebhookconfiguration users.iam.kubesphere.io) and the installer registers it "
        "again"]
    assert credentials.webhook_url_problems({"webhooks": rendered["webhooks"]}, rendered) == []
    assert credentials.webhook_url_problems({}, rendered) == []
