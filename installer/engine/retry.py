"""When failed modules are retried and drift is checked: pure functions of the cc's status (no API client)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from installer.engine.planning import STATE_TOO_NEW, STATE_UNREADABLE
from installer.engine.status import Phase, condition_of
from installer.settings import MEMBERS_JOINED

BACKOFF_BASE, BACKOFF_MAX = 30, 1800


def backoff_seconds(attempts: int) -> int:
    return min(BACKOFF_BASE * 2 ** max(0, attempts - 1), BACKOFF_MAX)


def _parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def due_for_retry(status: dict[str, Any] | None, now: dt.datetime | None = None) -> list[str]:
    """Failed modules whose backoff has expired, and interrupted ones."""
    now = now or dt.datetime.now(dt.UTC)
    due = []
    for name, mod in ((status or {}).get("modules") or {}).items():
        if mod.get("phase") not in (Phase.FAILED, Phase.INTERRUPTED):
            continue
        retry_at = mod.get("nextRetryTime")
        if not retry_at or _parse_time(retry_at) <= now:
            due.append(name)
    return sorted(due)


def drift_check_due(status: dict[str, Any] | None, interval: int, now: dt.datetime | None = None) -> bool:
    """Whether the last drift check (``status.lastDriftCheck``) is ``interval`` seconds old or more."""
    last = (status or {}).get("lastDriftCheck")
    now = now or dt.datetime.now(dt.UTC)
    return not last or (now - _parse_time(last)).total_seconds() >= interval


def refusal_to_recheck(status: dict[str, Any] | None) -> bool:
    """Whether the reconcile stalled for the cluster's sake, which can change without an edit of the cc (member
    clusters joined; the state Secret unreadable, or a newer installer's, until it is repaired or reset): the
    schedule binding tries it again."""
    return condition_of(status or {}, "Stalled").get("reason") in (MEMBERS_JOINED, STATE_UNREADABLE, STATE_TOO_NEW)
