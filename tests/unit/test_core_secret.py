"""kubesphere-secret's generated values: the admin token and their stability across runs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import bcrypt
import pytest

from installer.objects.core_secret import (
    ADMIN_CLAIMS,
    DEFAULT_PASSWORD,
    admin_user,
    desired_data,
    jwt_hs256,
    overridden,
    random_password,
)
from installer.objects.credentials import Refused


def test_jwt_hs256_matches_the_reference_vector() -> None:
    # The example token of RFC 7519 tooling (jwt.io): same header, claims and key give the same bytes.
    token = jwt_hs256({"sub": "1234567890", "name": "John Doe", "iat": 1516239022}, "your-256-bit-secret")
    assert token == ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaW"
                     "F0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")


def test_admin_token_is_signed_with_the_secret() -> None:
    data = desired_data({})
    header, payload, signature = data["token"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims == ADMIN_CLAIMS
    expected = hmac.new(data["secret"].encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)) == expected


def test_generated_values_are_stable() -> None:
    first = desired_data({}, admin_password="")
    assert len(first["secret"]) == 32 and first["secret"].isalnum()
    assert desired_data(first, admin_password="", admin_exists=True) == first
    # Clearing or omitting jwtSecret later keeps the key; a changed adminPassword does not reset the password.
    assert desired_data(first, jwt_secret="", admin_password="Other1234", admin_exists=True) == first
    assert desired_data({}) != desired_data({})


def test_a_user_set_jwt_secret_replaces_the_key_and_the_token() -> None:
    first = desired_data({}, admin_password="Passw0rdX")
    rotated = desired_data(first, jwt_secret="chosen-by-the-user")
    assert rotated["secret"] == "chosen-by-the-user"
    assert rotated["token"] == jwt_hs256(ADMIN_CLAIMS, "chosen-by-the-user") != first["token"]
    assert rotated["initAdminPassword"] == "Passw0rdX"
    assert desired_data(rotated, jwt_secret="chosen-by-the-user", admin_exists=True) == rotated


def test_initial_admin_password() -> None:
    assert desired_data({})["initAdminPassword"] == DEFAULT_PASSWORD  # key absent from the spec
    assert desired_data({}, admin_password="Str0ngPass")["initAdminPassword"] == "Str0ngPass"
    generated = desired_data({}, admin_password="")["initAdminPassword"]  # present but empty: random
    assert generated != DEFAULT_PASSWORD and len(generated) == 16
    # An existing admin (installed before) keeps its password: none is recorded.
    assert "initAdminPassword" not in desired_data({}, admin_password="Str0ngPass", admin_exists=True)


def test_random_passwords_meet_the_complexity_rule() -> None:
    for _ in range(50):
        password = random_password()
        assert any(c.isupper() for c in password) and any(c.islower() for c in password)
        assert any(c.isdigit() for c in password) and len(password) >= 8


def test_admin_user_object() -> None:
    user = admin_user("Str0ngPass", {"a": "b"})
    assert user["kind"] == "User" and user["metadata"]["name"] == "admin"
    assert user["metadata"]["annotations"]["iam.kubesphere.io/globalrole"] == "platform-admin"
    assert user["spec"]["email"] == "admin@kubesphere.io"
    hashed = user["spec"]["password"]  # as upstream's chart stored the default password: never in plain text
    assert hashed.startswith("$2a$10$") and "Str0ngPass" not in hashed
    assert bcrypt.checkpw(b"Str0ngPass", hashed.encode()) and not bcrypt.checkpw(b"Str0ngPasS", hashed.encode())


def test_a_found_jwt_key_too_short_is_refused_unless_the_spec_sets_one() -> None:
    with pytest.raises(Refused) as refused:
        desired_data({"secret": "a"}, admin_exists=True)
    assert str(refused.value).startswith("Secret kubesphere-system/kubesphere-secret: the JWT signing key (key "
                                         "'secret') is shorter than 32 characters; set authentication.jwtSecret")
    assert "'a'" not in str(refused.value)
    assert desired_data({"secret": "a"}, jwt_secret="b" * 32, admin_exists=True)["secret"] == "b" * 32
    assert desired_data({"secret": ""}, admin_exists=True)["secret"] != ""  # empty: generated, as when missing
    kept = "Kx8vQ2mZp4LrT9wYb6NcJ3hD5sGf1aUe"
    assert desired_data({"secret": kept}, admin_exists=True)["secret"] == kept


def test_the_specs_admin_password_wins_over_a_found_one_while_there_is_no_admin() -> None:
    found = {"secret": "kQ3x9LmZ2vR8pT4wN6bY1cH7dJ5sF0gA", "initAdminPassword": "Planted-Passw0rd"}
    data = desired_data(found, admin_password="Chosen-Passw0rd")
    assert data["initAdminPassword"] == "Chosen-Passw0rd"
    assert overridden(found, data) == ["Secret kubesphere-system/kubesphere-secret: initAdminPassword replaced by "
                                       "spec.authentication.adminPassword (no admin user exists yet, so the spec's "
                                       "password is the one the admin gets)"]
    random = desired_data(found, admin_password="")["initAdminPassword"]  # empty: a new random one, as upstream
    assert random not in ("Planted-Passw0rd", DEFAULT_PASSWORD) and len(random) == 16
    # Without adminPassword in the spec, a found password that meets the rule is kept, a weak one refused.
    kept = desired_data(found)
    assert kept["initAdminPassword"] == "Planted-Passw0rd" and overridden(found, kept) == []
    with pytest.raises(Refused, match="initAdminPassword does not meet KubeSphere's password rule: it needs at "
                                      "least 8 characters, an uppercase letter, a digit; set authentication"):
        desired_data({**found, "initAdminPassword": "weak"})
    # An admin exists: the found key is left as it is, weak or not, and the spec's password changes nothing.
    assert desired_data({**found, "initAdminPassword": "weak"}, admin_password="Chosen-Passw0rd",
                        admin_exists=True)["initAdminPassword"] == "weak"
