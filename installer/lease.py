"""A Lease that keeps two reconciles (two installer pods, or a pod and a local run) from overlapping."""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import LEASE_NAME, NAMESPACE

log = logging.getLogger(__name__)
DURATION = 60


class LeaseHeld(RuntimeError):
    """Another installer holds the lease."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _expired(spec: client.V1LeaseSpec) -> bool:
    if not spec.holder_identity or not spec.renew_time:
        return True
    return (_now() - spec.renew_time).total_seconds() > (spec.lease_duration_seconds or DURATION)


class Lease:
    def __init__(self, api: client.ApiClient, name: str = LEASE_NAME, namespace: str = NAMESPACE) -> None:
        self.coord = client.CoordinationV1Api(api)
        self.name, self.namespace = name, namespace
        self.identity = f"{socket.gethostname()}-{os.getpid()}"

    def _spec(self) -> client.V1LeaseSpec:
        now = _now()
        return client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=DURATION,
                                  acquire_time=now, renew_time=now)

    def acquire(self) -> None:
        try:
            lease = self.coord.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name), spec=self._spec())
            self.coord.create_namespaced_lease(self.namespace, body)
            return
        if lease.spec.holder_identity not in (None, self.identity) and not _expired(lease.spec):
            raise LeaseHeld(f"another reconcile is running ({lease.spec.holder_identity})")
        lease.spec = self._spec()
        # replace() carries resourceVersion: a concurrent acquirer gets a 409 instead of both winning.
        try:
            self.coord.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            if exc.status == 409:
                raise LeaseHeld("another reconcile took the lease") from exc
            raise

    def renew(self) -> None:
        self.coord.patch_namespaced_lease(self.name, self.namespace, {"spec": {"renewTime": _now().isoformat()}})

    def release(self) -> None:
        self.coord.patch_namespaced_lease(self.name, self.namespace, {"spec": {"holderIdentity": None}})

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        stop = threading.Event()

        def keep_alive() -> None:
            while not stop.wait(DURATION / 3):
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
