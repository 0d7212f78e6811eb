"""What the API server's refusals say: its own message, and the fields it names as unchangeable.
"""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

#: What the API server's validation says of a field that cannot change (apimachinery's ValidateImmutableField, a
#: Service's clusterIP, a StatefulSet's spec, a bound PVC's spec).
IMMUTABLE_MESSAGES = ("field is immutable", "may not change once set", "updates to statefulset spec for fields other",
                      "spec is immutable after creation")


def immutable_fields(exc: ApiException) -> list[str]:
    """The fields a refused write names as unchangeable, when every cause of the refusal is one (else ``[]``)."""
    if exc.status != 422:
        return []
    try:
        causes = (json.loads(exc.body or "{}").get("details") or {}).get("causes") or []
    except (ValueError, AttributeError):
        return []
    fields = [c.get("field") or "?" for c in causes if any(m in (c.get("message") or "") for m in IMMUTABLE_MESSAGES)]
    return list(dict.fromkeys(fields)) if causes and len(fields) == len(causes) else []


class Rejected(RuntimeError):
    """The API server refused an object; the message is its own reason, naming the object."""


def api_reason(exc: ApiException) -> str:
    """The API server's own message (``Status.message``), without headers or the raw body."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return message or f"{exc.status} {exc.reason}"
