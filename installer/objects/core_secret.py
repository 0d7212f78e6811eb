"""Secret ``kubesphere-secret`` and the admin ``User``: generated once, stable across runs.

The Secret holds ``secret`` (the JWT signing key; random unless ``authentication.jwtSecret`` is set), ``token``
(the admin's static HS256 token, signed with it, as upstream's ``jwt.sh``) and ``initAdminPassword``.
Generated values are kept on every later run; only a user-set ``jwtSecret`` replaces the key (and so the
token). What is found is checked first (an Opaque Secret of UTF-8 text, a key of at least 32 characters, an initial
password that meets KubeSphere's rule) and refused otherwise, naming the Secret and the rule. The admin ``User`` is
created once, with the bcrypt hash of ``initAdminPassword`` as its password (as
upstream's chart wrote the default one; KubeSphere's controller keeps a hash as it is); after that the user owns it
(changing the password in the console must survive re-runs). Nothing here returns or logs a secret value.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import string
from dataclasses import dataclass, field
from typing import Any

import bcrypt
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from installer.objects.credentials import (
    OPAQUE,
    Refused,
    admin_password_problem,
    decoded,
    jwt_key_problem,
    type_problem,
)
from installer.objects.field_takeover import LAST_APPLIED, take_over
from installer.settings import CORE_SECRET, FIELD_MANAGER, MANAGED_BY, MODULE_LABEL, NAMESPACE

SECRET_NAME = CORE_SECRET
DEFAULT_PASSWORD = "P@88w0rd"  # upstream's documented default, printed by the original installer too
ADMIN = "admin"
ADMIN_EMAIL = "admin@kubesphere.io"
#: The static-token claims of upstream's jwt-script/jwt.sh.
ADMIN_CLAIMS = {"email": ADMIN_EMAIL, "username": ADMIN, "token_type": "static_token"}
USER_API = "iam.kubesphere.io/v1alpha2"
_ALPHABET = string.ascii_letters + string.digits


def random_string(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def random_password(length: int = 16) -> str:
    """A random password that meets KubeSphere's rule (upper, lower and digit)."""
    while True:
        candidate = random_string(length)
        if any(c.isupper() for c in candidate) and any(c.islower() for c in candidate) \
                and any(c.isdigit() for c in candidate):
            return candidate


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jwt_hs256(claims: dict[str, Any], key: str) -> str:
    """A compact HS256 JWT (deterministic: no ``iat``, like upstream's static token)."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(key.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def desired_data(current: dict[str, str], jwt_secret: str = "", admin_password: str | None = None,
                 admin_exists: bool = False, namespace: str = NAMESPACE) -> dict[str, str]:
    """The Secret's data (plain text) given what the cluster holds now.

    ``admin_password``: ``None`` when the spec has no ``authentication.adminPassword`` (upstream's default
    password), ``""`` for a random one. ``initAdminPassword`` matters only while there is no admin ``User``: then the
    spec's ``adminPassword`` wins over a found one, as upstream patched it in (see :func:`initial_password`); an
    existing admin keeps its password and the key stays as it is. A found JWT key too short to sign tokens is
    :class:`~installer.objects.credentials.Refused` (replacing it would end every issued token and a member's trust).
    """
    key = jwt_secret or current.get("secret") or random_string(32)
    if not jwt_secret and current.get("secret") and (rule := jwt_key_problem(key)):
        raise Refused(namespace, SECRET_NAME, rule,
                      "set authentication.jwtSecret in the cc (on a member cluster: the host's), or delete the key "
                      "to have one generated (tokens signed with the old key stop working)")
    data = {"secret": key, "token": jwt_hs256(ADMIN_CLAIMS, key)}
    if admin_exists:
        if "initAdminPassword" in current:
            data["initAdminPassword"] = current["initAdminPassword"]
    else:
        data["initAdminPassword"] = initial_password(current.get("initAdminPassword"), admin_password, namespace)
    return data


def initial_password(found: str | None, admin_password: str | None, namespace: str = NAMESPACE) -> str:
    """The admin's initial password while there is no admin ``User``: the spec's ``adminPassword`` when set (``""``:
    a new random one, as upstream generated it), else the ``initAdminPassword`` found, which must meet KubeSphere's
    password rule, else upstream's default."""
    if admin_password is not None:
        return admin_password or random_password()
    if found is None:
        return DEFAULT_PASSWORD
    if rule := admin_password_problem(found):
        raise Refused(namespace, SECRET_NAME, rule,
                      "set authentication.adminPassword in the cc, or delete the key to use the default password")
    return found


def overridden(current: dict[str, str], data: dict[str, str], namespace: str = NAMESPACE) -> list[str]:
    """What the user should know about ``data`` replacing ``current``: a found ``initAdminPassword`` that the spec's
    ``adminPassword`` replaced (names only)."""
    found = current.get("initAdminPassword")
    if found is not None and data.get("initAdminPassword") != found:
        return [f"Secret {namespace}/{SECRET_NAME}: initAdminPassword replaced by spec.authentication.adminPassword "
                "(no admin user exists yet, so the spec's password is the one the admin gets)"]
    return []


def password_hash(password: str) -> str:
    """The bcrypt hash KubeSphere stores (Go's ``$2a$``, cost 10): the plain password is never in the ``User``."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10, prefix=b"2a")).decode()


def admin_user(password: str, labels: dict[str, str]) -> dict[str, Any]:
    """The admin ``User``, its password hashed (``password``: the plain initial password)."""
    return {
        "apiVersion": USER_API, "kind": "User",
        "metadata": {"name": ADMIN, "labels": labels,
                     "annotations": {"iam.kubesphere.io/globalrole": "platform-admin",
                                     "iam.kubesphere.io/uninitialized": "true"}},
        "spec": {"email": ADMIN_EMAIL, "password": password_hash(password)},
    }


@dataclass
class CoreSecretOutcome:
    """What changed, by name only."""

    changed_keys: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changed_keys or self.created)


def ensure_core_secret(api: client.ApiClient, namespace: str, module: str, jwt_secret: str = "",
           admin_password: str | None = None) -> CoreSecretOutcome:
    """Create or complete ``kubesphere-secret`` and create the admin ``User`` when missing."""
    dyn = DynamicClient(api)
    secrets_api = dyn.resources.get(api_version="v1", kind="Secret")
    users = dyn.resources.get(api_version=USER_API, kind="User")
    labels = {**MANAGED_BY, MODULE_LABEL: module}
    outcome = CoreSecretOutcome()

    try:
        live = secrets_api.get(name=SECRET_NAME, namespace=namespace).to_dict()
    except NotFoundError:
        live = None
        outcome.created.append(f"Secret/{namespace}/{SECRET_NAME}")
    if live is not None and (rule := type_problem(live.get("type"), (OPAQUE,))):
        raise Refused(namespace, SECRET_NAME, rule, "its type cannot change in place: move its data to an Opaque "
                      "Secret of that name")
    current = decoded(namespace, SECRET_NAME, (live or {}).get("data"))
    try:
        admin = users.get(name=ADMIN).to_dict()
    except NotFoundError:
        admin = None
    admin_exists = admin is not None

    data = desired_data(current, jwt_secret, admin_password, admin_exists, namespace)
    outcome.notes = overridden(current, data, namespace)
    outcome.changed_keys = sorted(k for k in data if current.get(k) != data[k]) if live else []
    live_labels = ((live or {}).get("metadata") or {}).get("labels") or {}
    if live is None or outcome.changed_keys or not labels.items() <= live_labels.items():
        if live is not None:  # made by the original installer: its fields (other keys too) become the installer's
            take_over(secrets_api, live["metadata"], "v1")
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": SECRET_NAME, "namespace": namespace, "labels": labels},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in {**current, **data}.items()}}
        secrets_api.server_side_apply(body=body, name=SECRET_NAME, namespace=namespace,
                                      field_manager=FIELD_MANAGER, force_conflicts=True)

    if admin is None:
        password = data.get("initAdminPassword", DEFAULT_PASSWORD)
        users.create(body=admin_user(password, labels), field_manager=FIELD_MANAGER)
        outcome.created.append(f"User/{ADMIN}")
    elif not labels.items() <= ((admin["metadata"].get("labels") or {}).items()):
        adopt_admin(users, admin, labels)
    return outcome


def adopt_admin(users: Any, admin: dict[str, Any], labels: dict[str, str]) -> None:
    """Take over the admin ``User`` the original made (its chart ks-core, or kubectl): its fields move to the
    installer, which applies it as it is (password, e-mail, state kept) with the module's labels, without what only
    the original's tools wrote (Helm's release annotations, kubectl's last-applied copy)."""
    meta = admin["metadata"]
    take_over(users, meta, USER_API)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != LAST_APPLIED and not k.startswith("meta.helm.sh/")}
    body = {k: v for k, v in admin.items() if k not in ("metadata", "apiVersion", "kind")}
    body.update({"apiVersion": USER_API, "kind": "User", "metadata": {
        "name": ADMIN, "labels": {**(meta.get("labels") or {}), **labels}, "annotations": annotations}})
    users.server_side_apply(body=body, name=ADMIN, field_manager=FIELD_MANAGER, force_conflicts=True)
