"""The one writer of the cc's status: upstream fields, per-module status and conditions, batched.

Thread-safe: the reconcile and its welcome step share one writer."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from installer.spec import merge, nested

if TYPE_CHECKING:
    from installer.engine.ordered_writes import OrderedWrites

log = logging.getLogger("installer")


class Phase:
    INSTALLING = "Installing"
    UPGRADING = "Upgrading"
    UNINSTALLING = "Uninstalling"
    INSTALLED = "Installed"
    UNINSTALLED = "Uninstalled"
    FAILED = "Failed"
    BLOCKED = "Blocked"
    INTERRUPTED = "Interrupted"
    """The installer stopped while the module ran; it is re-run on the next start (no backoff)."""


PHASES = [value for key, value in vars(Phase).items() if key.isupper()]
PROGRESSING = "Progressing"
"""Ready's reason while the cc's generation is not reconciled yet (Ready ``Unknown`` at that generation)."""


def condition_of(status: dict[str, Any], type_: str) -> dict[str, Any]:
    """The condition of ``type_`` in a cc's status (``{}`` when it has none)."""
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), {})


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def enabled_time() -> str:
    """Upstream's ``enabledTime`` format (``date +%Y-%m-%dT%H:%M:%S%Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%Z")


def unreconciled(cc: dict[str, Any]) -> dict[str, Any] | None:
    """The status patch that turns Ready ``Unknown`` when it says True for an older generation than the cc's (an
    edit the installer has not reconciled yet); None when Ready is not True or is about this generation.

    kstatus' rule: Ready is True only when it was observed at ``metadata.generation``. The condition takes the
    new generation (its readiness is what is unknown); ``status.observedGeneration`` stays at the one reconciled."""
    generation = (cc.get("metadata") or {}).get("generation")
    status = cc.get("status") or {}
    ready = condition_of(status, "Ready")
    if ready.get("status") != "True" or generation is None:
        return None
    if ready.get("observedGeneration", status.get("observedGeneration")) == generation:
        return None
    cond = {**ready, "status": "Unknown", "reason": PROGRESSING, "observedGeneration": generation,
            "message": pending_message(generation, ready.get("observedGeneration")),
            "lastTransitionTime": now_rfc3339()}
    return {"conditions": [cond if c.get("type") == "Ready" else c for c in status.get("conditions") or []]}


class GuardedCc(Protocol):
    """The cc as :class:`installer.objects.cluster.ClusterConfigurations` reads and guards it."""

    def get(self) -> dict[str, Any] | None: ...

    def patch_status_at(self, status: dict[str, Any], resource_version: str) -> bool: ...


def mark_unreconciled(ccs: GuardedCc, cc: dict[str, Any]) -> None:
    """Turn Ready Unknown at once when ``cc`` (as just read) says True for an older generation than its own
    (:func:`unreconciled`); ``cc``'s status is updated to match. A cc that changed since it was read is read
    again."""
    for _ in range(3):
        patch = unreconciled(cc)
        if patch is None:
            return
        if ccs.patch_status_at(patch, cc["metadata"]["resourceVersion"]):
            cc["status"] = {**(cc.get("status") or {}), **patch}
            log.info("Generation %s is not reconciled yet: Ready is Unknown until it is",
                     cc["metadata"].get("generation"))
            return
        live = ccs.get()
        if live is None:
            return
        cc.clear()
        cc.update(live)


def pending_message(generation: int, reconciled: int | None, detail: str = "") -> str:
    """Ready's message while generation ``generation`` waits for its reconcile."""
    was = f"; generation {reconciled}: {detail}" if detail else ""
    return f"generation {generation} is not reconciled yet{was}"


class StatusSink(Protocol):
    """Where status patches go: the cc through the API (installer.objects.kube), or shell-operator's patch file."""

    def patch_status(self, status: dict[str, Any]) -> None: ...


class LiveCc(Protocol):
    """The cc as it is now, and a status patch that applies only while it still is (installer.objects.cluster)."""

    def get(self) -> dict[str, Any] | None: ...
    def patch_status_at(self, status: dict[str, Any], resource_version: str) -> bool: ...


class StatusWriter:
    """Collects status changes and writes them as one merge patch per ``flush``; with ``writes``, in its thread
    (the reconcile goes on meanwhile; :meth:`drain` waits for them)."""

    def __init__(self, ccs: StatusSink, current: dict[str, Any] | None, writes: OrderedWrites | None = None) -> None:
        self.ccs = ccs
        self.writes = writes
        self.current = current or {}
        self.conditions: list[dict[str, Any]] = list(self.current.get("conditions") or [])
        self.pending: dict[str, Any] = {}
        self.lock = threading.RLock()
        self.flushed_at = 0.0

    def update(self, patch: dict[str, Any]) -> None:
        with self.lock:
            merge(self.pending, patch)

    def module(self, name: str, phase: str, **fields: Any) -> None:
        with self.lock:
            self._module(name, phase, fields)

    def _module(self, name: str, phase: str, fields: dict[str, Any]) -> None:
        previous = (self.current.get("modules") or {}).get(name) or {}
        body = {"phase": phase, **fields}
        if previous.get("phase") != phase:
            body["lastTransitionTime"] = now_rfc3339()
        for key in ("message", "failedTask"):
            body.setdefault(key, None)
        self.update({"modules": {name: body}})
        mirror = self.current.setdefault("modules", {}).setdefault(name, {})
        for key, value in body.items():
            if value is None:
                mirror.pop(key, None)
            else:
                mirror[key] = value

    def enabled(self, key: str, extra: dict[str, Any] | None = None) -> None:
        """Upstream ``status.<key>: {status: enabled, enabledTime}`` (without the message of a failed install)."""
        self.update(nested(key, {"status": "enabled", "enabledTime": enabled_time(), "message": None,
                                 **(extra or {})}))

    def failed(self, key: str, message: str) -> None:
        """``status.<key>: {status: failed, message}``: a component whose install did not come up."""
        self.update(nested(key, {"status": "failed", "message": message}))

    def cleared(self, key: str) -> None:
        """Remove ``status.<key>``; nothing to add when a parent key is already being removed (a merge of the
        child's null into the parent's would bring the parent back as ``{child: null}``)."""
        with self.lock:
            node: Any = self.pending
            for part in key.split("."):
                if not isinstance(node, dict) or part not in node:
                    break
                if node[part] is None:
                    return
                node = node[part]
            self.update(nested(key, None))

    def condition(self, type_: str, status: bool | None, reason: str, message: str, generation: int | None) -> None:
        """Set a condition; ``status`` None is ``Unknown`` (e.g. Ready while modules run)."""
        with self.lock:
            self._condition(type_, status, reason, message, generation)

    def _condition(self, type_: str, status: bool | None, reason: str, message: str, generation: int | None) -> None:
        value = "Unknown" if status is None else "True" if status else "False"
        existing = next((c for c in self.conditions if c["type"] == type_), None)
        changed = existing is None or existing.get("status") != value
        cond = {"type": type_, "status": value, "reason": reason, "message": message[:32000],
                "observedGeneration": generation,
                "lastTransitionTime": now_rfc3339() if changed else existing["lastTransitionTime"]}
        self.conditions = [c for c in self.conditions if c["type"] != type_] + [cond]
        self.update({"conditions": self.conditions})

    def flush(self) -> None:
        with self.lock:  # held while patching (or queueing) too, so patches land in the order they were made
            pending, self.pending = self.pending, {}
            if pending and self.writes is not None:
                self.writes.submit(functools.partial(self.ccs.patch_status, pending))
            elif pending:
                self.ccs.patch_status(pending)
            self.flushed_at = time.monotonic()

    def drain(self) -> None:
        """Wait for the patches queued by :meth:`flush`; raise the first that failed."""
        if self.writes is not None:
            self.writes.drain()

    def flush_with(self, write: Callable[[dict[str, Any]], bool]) -> bool:
        """Flush through ``write``, which may refuse (False, e.g. the cc changed since it was read): then the
        changes stay for the next flush. It comes after every patch flushed before."""
        with self.lock:
            self.drain()
            pending, self.pending = self.pending, {}
            if pending and not write(pending):
                merge(pending, self.pending)
                self.pending = pending
                return False
            self.flushed_at = time.monotonic()
            return True

    def flush_every(self, seconds: float) -> None:
        """Flush if the last flush is ``seconds`` old: progress while playbooks run, one patch per interval."""
        if time.monotonic() - self.flushed_at >= seconds:
            self.flush()
