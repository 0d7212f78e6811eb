"""A Lease that keeps two reconciles (two installer pods, or a pod and a local run) from overlapping.

The holder identity is ``<host>/<pid>/<process start time>``. A lease whose holder is known to be dead (same
host and that process is gone, or, in a cluster, its pod no longer exists) is taken over at once instead of
waiting for it to expire. Every write carries the resourceVersion of the lease this process last wrote, so a
process that lost the lease finds out at its next renewal (and stops before its next module) instead of
overwriting the new holder.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.escape import escaped
from installer.settings import LEASE_NAME, NAMESPACE

log = logging.getLogger("installer")
DURATION = 60


class LeaseHeld(RuntimeError):
    """Another installer holds the lease."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _expired(spec: client.V1LeaseSpec) -> bool:
    if not spec.holder_identity or not spec.renew_time:
        return True
    return (_now() - spec.renew_time).total_seconds() > (spec.lease_duration_seconds or DURATION)


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``None`` if it does not exist)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def holder_identity() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}/{pid}/{process_start(pid)}"


class Lease:
    def __init__(self, api: client.ApiClient, name: str = LEASE_NAME, namespace: str = NAMESPACE,
                 on_lost: Callable[[], None] | None = None) -> None:
        self.coord = client.CoordinationV1Api(api)
        self.core = client.CoreV1Api(api)
        self.name, self.namespace = name, namespace
        self.identity = holder_identity()
        self.on_lost = on_lost or (lambda: None)
        self.lost = False
        self._lease: client.V1Lease | None = None

    def _spec(self) -> client.V1LeaseSpec:
        now = _now()
        return client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=DURATION,
                                  acquire_time=now, renew_time=now)

    def _holder_gone(self, holder: str) -> bool:
        """Whether the holder is known to be dead: its process on this host, or its pod, no longer exists."""
        host, _, rest = holder.partition("/")
        pid, _, start = rest.partition("/")
        if host == socket.gethostname() and pid.isdigit():
            return process_start(int(pid)) != start
        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            return False
        try:
            self.core.read_namespaced_pod(host, self.namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    def acquire(self) -> None:
        try:
            lease = self.coord.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name), spec=self._spec())
            try:
                self._lease = self.coord.create_namespaced_lease(self.namespace, body)
            except ApiException as exc2:
                if exc2.status == 409:
                    raise LeaseHeld("another reconcile took the lease") from None
                raise
            return
        holder = lease.spec.holder_identity
        if holder not in (None, self.identity) and not _expired(lease.spec):
            if not self._holder_gone(holder):
                raise LeaseHeld(f"another reconcile is running ({escaped(holder, 120)})")
            log.info("Taking over the lease of %s: that installer is no longer running", escaped(holder, 120))
        lease.spec = self._spec()
        try:
            self._lease = self.coord.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            if exc.status == 409:
                raise LeaseHeld("another reconcile took the lease") from None
            raise

    def _write(self, holder: str | None) -> None:
        assert self._lease is not None
        self._lease.spec.holder_identity = holder
        self._lease.spec.renew_time = _now()
        self._lease = self.coord.replace_namespaced_lease(self.name, self.namespace, self._lease)

    def renew(self) -> None:
        """Extend the lease; on a conflict (someone else wrote it) the lease is lost."""
        try:
            self._write(self.identity)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            self.lost = True
            log.error("Lost the reconcile lease to another installer; no further module is started")
            self.on_lost()

    def release(self) -> None:
        if self.lost or self._lease is None:
            return
        try:
            self._write(None)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        stop = threading.Event()

        def keep_alive() -> None:
            while not stop.wait(DURATION / 3) and not self.lost:
                try:
                    self.renew()
                except ApiException as exc:  # keep going; a missed renewal only shortens the lease
                    log.warning("lease renewal failed: %s", exc.reason)

        renewer = threading.Thread(target=keep_alive, name="lease", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            self.release()
