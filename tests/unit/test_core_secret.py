"""kubesphere-secret's generated values: the admin token and their stability across runs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import bcrypt

from installer.core_secret import ADMIN_CLAIMS, DEFAULT_PASSWORD, admin_user, desired_data, jwt_hs256, random_password


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
    assert desired_data(first, admin_password="") == first
    # Clearing or omitting jwtSecret later keeps the key; a changed adminPassword does not reset the password.
    assert desired_data(first, jwt_secret="", admin_password="Other1234") == first
    assert desired_data({}) != desired_data({})


def test_a_user_set_jwt_secret_replaces_the_key_and_the_token() -> None:
    first = desired_data({}, admin_password="Passw0rdX")
    rotated = desired_data(first, jwt_secret="chosen-by-the-user")
    assert rotated["secret"] == "chosen-by-the-user"
    assert rotated["token"] == jwt_hs256(ADMIN_CLAIMS, "chosen-by-the-user") != first["token"]
    assert rotated["initAdminPassword"] == "Passw0rdX"
    assert desired_data(rotated, jwt_secret="chosen-by-the-user") == rotated


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
