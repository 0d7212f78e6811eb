"""A Secret holding one generated credential: created once with a random value, then kept as it is.

An existing Secret (also one created by hand or by an earlier installer) keeps every value it has; it only
gains the module's labels and, if it lacks the key, a random value for it. A found one is checked first: an Opaque
Secret whose key, when present, holds text that is not blank; else it is :class:`~installer.objects.credentials.Refused`
(upstream never replaced a found one either, and the servers and clients that read it would disagree until
restarted). Nothing here returns or logs a secret value.
"""

from __future__ import annotations

import base64
import secrets
import string
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from installer.objects.credentials import OPAQUE, Refused, decoded, nonempty_problem, type_problem
from installer.objects.field_takeover import take_over
from installer.settings import FIELD_MANAGER, MANAGED_BY, MODULE_LABEL


def random_letters(length: int) -> str:
    """``length`` random ASCII letters (upstream's ``password`` lookup with ``chars=ascii_letters``)."""
    return "".join(secrets.choice(string.ascii_letters) for _ in range(length))


@dataclass
class SecretOutcome:
    """What changed, by name only."""

    created: list[str] = field(default_factory=list)
    added_keys: list[str] = field(default_factory=list)
    labelled: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.created or self.added_keys or self.labelled)


def ensure_random_secret(api: client.ApiClient, namespace: str, name: str, key: str, module: str,
                         length: int = 15, annotations: dict[str, str] | None = None) -> SecretOutcome:
    """Make Secret ``namespace/name`` hold ``key``: generated only when missing, never replaced; with
    ``annotations`` (its policy: installer.settings.PRUNE_ANNOTATION) set on it."""
    secrets_api = DynamicClient(api).resources.get(api_version="v1", kind="Secret")
    try:
        live = secrets_api.get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        live = None
    outcome, body = planned_secret(live, namespace, name, key, module, length, annotations)
    if body is not None:
        if live is not None:  # made by the original installer (or by hand): its fields become the installer's
            take_over(secrets_api, live["metadata"], "v1")
        secrets_api.server_side_apply(body=body, name=name, namespace=namespace, field_manager=FIELD_MANAGER,
                                      force_conflicts=True)
    return outcome


def planned_secret(live: dict[str, Any] | None, namespace: str, name: str, key: str, module: str,
                   length: int = 15, annotations: dict[str, str] | None = None
                   ) -> tuple[SecretOutcome, dict[str, Any] | None]:
    """The one decision of :func:`ensure_random_secret` and its preview: given the Secret found (None: absent),
    what changes and the Secret to apply (None: nothing to write). A found Secret :func:`check_found` refuses is
    :class:`~installer.objects.credentials.Refused`."""
    labels = {**MANAGED_BY, MODULE_LABEL: module}
    outcome = SecretOutcome()
    if live is None:
        outcome.created.append(f"Secret/{namespace}/{name}")
    else:
        check_found(namespace, name, key, live)
    data = dict((live or {}).get("data") or {})
    if key not in data:
        data[key] = base64.b64encode(random_letters(length).encode()).decode()
        if live is not None:
            outcome.added_keys.append(key)
    live_meta = (live or {}).get("metadata") or {}
    policy = dict(annotations or {})
    outcome.labelled = live is not None and not (labels.items() <= (live_meta.get("labels") or {}).items()
                                                 and policy.items() <= (live_meta.get("annotations") or {}).items())
    if not outcome.changed:
        return outcome, None
    meta = {"name": name, "namespace": namespace, "labels": labels, **({"annotations": policy} if policy else {})}
    return outcome, {"apiVersion": "v1", "kind": "Secret", "type": (live or {}).get("type") or "Opaque",
                     "metadata": meta, "data": data}


def check_found(namespace: str, name: str, key: str, live: dict[str, Any]) -> None:
    """Refuse a found Secret that is not Opaque or whose ``key`` is present but blank."""
    if rule := type_problem(live.get("type"), (OPAQUE,)):
        raise Refused(namespace, name, rule, "its type cannot change in place: move its data to an Opaque Secret "
                      "of that name")
    found = (live.get("data") or {}).get(key)
    value = decoded(namespace, name, {key: found}).get(key) if found is not None else None
    if value is not None and (rule := nonempty_problem(key, value)):
        raise Refused(namespace, name, rule, "put the password in it, or delete the key to have one generated "
                      "(then restart what reads it)")
