"""Checks of the credentials the installer finds in the cluster, before it keeps them.

Each check returns the rule a value breaks, as a short phrase that never holds the value, or None when it passes.
:class:`Refused` is what a task fails with when a found credential cannot be kept and must not be replaced: its
message names the Secret (namespace/name), the rule and what to do.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

from installer.escape import escaped

#: Upstream generated the JWT signing key as 32 random characters (RFC 7518 §3.2 asks for 256 bits for HS256).
JWT_KEY_MIN = 32
#: The least estimated entropy (:func:`entropy_bits`) a found JWT key may have: 32 random hexadecimal digits pass.
JWT_KEY_MIN_BITS = 88
RSA_MIN_BITS = 2048
EC_MIN_BITS = 256
#: What KubeSphere asks of a password, as (pattern, what the password lacks when it does not match).
PASSWORD_RULES = ((r".{8,}", "at least 8 characters"), (r"[A-Z]", "an uppercase letter"),
                  (r"[a-z]", "a lowercase letter"), (r"[0-9]", "a digit"))
OPAQUE = "Opaque"
SA_TOKEN = "kubernetes.io/service-account-token"
SA_ANNOTATION = "kubernetes.io/service-account.name"


class Refused(Exception):
    """A credential found in Secret ``namespace/name`` breaks ``rule``; ``remedy`` says what the user can do."""

    def __init__(self, namespace: str, name: str, rule: str, remedy: str = "") -> None:
        self.secret = f"{namespace}/{name}"
        super().__init__(f"Secret {self.secret}: {rule}" + (f"; {remedy}" if remedy else ""))


def password_missing(password: str) -> list[str]:
    """What ``password`` lacks to meet KubeSphere's rule (empty when it meets it). Never includes the password."""
    return [missing for pattern, missing in PASSWORD_RULES if not re.search(pattern, password or "", re.S)]


def type_problem(actual: str | None, allowed: tuple[str, ...]) -> str | None:
    """Why a Secret of type ``actual`` (None: the API's default, Opaque) is not one of ``allowed``."""
    if (actual or OPAQUE) in allowed:
        return None
    return f"its type is '{escaped(actual or '', 80)}', not {' or '.join(allowed)}"


def decoded(namespace: str, name: str, data: Mapping[str, str] | None) -> dict[str, str]:
    """A Secret's ``data`` as text; :class:`Refused` names a key whose value is not base64 of UTF-8 text."""
    out = {}
    for key, value in (data or {}).items():
        try:
            out[key] = base64.b64decode(value or "", validate=True).decode()
        except (binascii.Error, ValueError):
            raise Refused(namespace, name, f"key '{escaped(key, 80)}' is not UTF-8 text",
                          "put the value back as text or delete the key") from None
    return out


def jwt_key_problem(key: str) -> str | None:
    """Why ``key`` cannot sign KubeSphere's tokens (HS256): too short, or guessable whatever its length (a space,
    a control or format character, a repeated pattern, or too little entropy for its length)."""
    what = "the JWT signing key (key 'secret')"
    if len(key) < JWT_KEY_MIN:
        return f"{what} is shorter than {JWT_KEY_MIN} characters"
    if any(unicodedata.category(c)[0] in "CZ" for c in key):
        return f"{what} holds spaces, control or format characters"
    if key in (key + key)[1:-1]:
        return f"{what} repeats a shorter pattern"
    if (bits := entropy_bits(key)) < JWT_KEY_MIN_BITS:
        return f"{what} is too predictable (about {bits:.0f} bits; at least {JWT_KEY_MIN_BITS})"
    return None


def entropy_bits(text: str) -> float:
    """An estimate of ``text``'s entropy: its length times the Shannon entropy of its characters' frequencies
    (32 random letters and digits: 126 or more; 32 hexadecimal digits: 93 or more; ``aaab...``: few)."""
    counts = Counter(text)
    return -len(text) * sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def nonempty_problem(key: str, value: str) -> str | None:
    """Why ``value`` cannot be a password (it is empty or blank)."""
    return None if value.strip() else f"key '{escaped(key, 80)}' is empty"


def admin_password_problem(password: str) -> str | None:
    """Why ``password`` cannot be the admin's initial password."""
    missing = password_missing(password)
    if not missing:
        return None
    return f"initAdminPassword does not meet KubeSphere's password rule: it needs {', '.join(missing)}"


def service_account_token_problem(secret_type: str | None, annotations: Mapping[str, str] | None,
                                  account: str) -> str | None:
    """Why a Secret cannot be ServiceAccount ``account``'s long-lived token."""
    wrong = type_problem(secret_type, (SA_TOKEN,))
    if wrong:
        return f"{wrong} (the token of ServiceAccount {account})"
    named = (annotations or {}).get(SA_ANNOTATION)
    if named != account:
        return f"it is the token of ServiceAccount '{escaped(named or '', 80)}', not {account}"
    return None


def public_key_problem(key: object, what: str) -> str | None:
    """Why the public key of ``what`` (a certificate) is too weak: RSA below 2048 bits, EC below 256."""
    if isinstance(key, rsa.RSAPublicKey):
        return f"{what} has a {key.key_size}-bit RSA key (at least {RSA_MIN_BITS})" \
            if key.key_size < RSA_MIN_BITS else None
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"{what} has a {key.curve.key_size}-bit EC key (at least {EC_MIN_BITS})" \
            if key.curve.key_size < EC_MIN_BITS else None
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return None
    return f"{what} has a {type(key).__name__} key (RSA or EC expected)"


def webhook_url_problems(live: dict[str, Any], rendered: dict[str, Any]) -> list[str]:
    """The webhooks of the live configuration ``live`` that the installer registers (``rendered``) with a Service but
    that call a URL there: an apply cannot turn one into the other (the API wants exactly one of them)."""
    ours = {h.get("name"): h for h in rendered.get("webhooks") or [] if isinstance(h, dict)}
    kind, name = rendered.get("kind"), (rendered.get("metadata") or {}).get("name")
    out = []
    for hook in live.get("webhooks") or []:
        mine = ours.get(hook.get("name")) if isinstance(hook, dict) else None
        if mine is None or not (hook.get("clientConfig") or {}).get("url"):
            continue
        service = (mine.get("clientConfig") or {}).get("service") or {}
        out.append(f"{kind} {name}: webhook '{escaped(hook['name'], 120)}' calls a URL where the installer registers "
                   f"Service {service.get('namespace')}/{service.get('name')}; delete the configuration "
                   f"(kubectl delete {str(kind).lower()} {name}) and the installer registers it again")
    return out
