"""When an object counts as ready (rolled out, complete, Available) and the wait for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from installer.objects.refs import Obj, ident


def established(crd: Obj) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def backoff(first: float = 0.1, limit: float = 2.0) -> Iterator[float]:
    """The pauses between polls: short at first (most waits end within a second), doubling up to ``limit``."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, limit)


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
#: Kinds :func:`wait_ready` waits for: workloads, Jobs (complete) and APIServices (Available).
WAITED_KINDS = (*WORKLOAD_KINDS, "Job", "APIService")


class JobFailed(RuntimeError):
    """A Job the module waits for has failed."""


def deployment_ref(name: str, namespace: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace}}


def _condition(live: Any, type_: str) -> dict[str, Any] | None:
    conditions = (live.status or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == type_), None)


def ready(live: Any) -> bool:
    """Whether an object is ready: a Deployment as ``kubectl rollout status`` says (the newest generation
    observed, every replica updated and available, no old replica left), a StatefulSet or DaemonSet with every
    replica ready, a Job complete, an APIService Available. A Deployment its user paused (``kubectl rollout pause``)
    rolls out nothing until resumed: it is left to them and counts as ready, as Helm's ``--wait`` counts it."""
    if live is None:
        return False
    spec, status, kind = live.spec, live.status or {}, live.kind
    if kind == "Deployment" and spec.get("paused"):
        return True
    if kind == "APIService":
        return (_condition(live, "Available") or {}).get("status") == "True"
    if kind == "Job":
        return (_condition(live, "Complete") or {}).get("status") == "True"
    if (status.get("observedGeneration") or 0) < (live.metadata.generation or 0):
        return False
    if kind == "DaemonSet":
        return (status.get("numberReady") or 0) >= (status.get("desiredNumberScheduled") or 1) > 0
    wanted = spec.get("replicas", 1)
    if kind == "StatefulSet":
        return (status.get("readyReplicas") or 0) >= wanted
    updated = status.get("updatedReplicas") or 0
    return updated >= wanted and (status.get("replicas") or 0) <= updated \
        and (status.get("availableReplicas") or 0) >= wanted


def _why(live: Any) -> str:
    """What the API says about an object that is not ready (the reason of its condition), or ``""``."""
    if live is None:
        return " (not found)"
    condition = {"APIService": "Available", "Job": "Failed"}.get(live.kind)
    found = _condition(live, condition) if condition else None
    if not found:
        return ""
    return f" ({found.get('reason') or ''}: {found.get('message') or ''})"


class WaitStopped(RuntimeError):
    """A wait given up because the caller is stopping."""


def wait_ready(dyn: DynamicClient, objects: list[Obj], timeout: float = 600,
               stop: threading.Event | None = None) -> None:
    """Poll the objects among ``objects`` of :data:`WAITED_KINDS` until each is :func:`ready`; TimeoutError
    names the rest (with the API's reason where it gives one), JobFailed a Job that failed, WaitStopped that
    ``stop`` was set."""
    deadline = time.monotonic() + timeout
    pending = [o for o in objects if o["kind"] in WAITED_KINDS]
    delays = backoff(first=0.25)
    while pending:
        live = {ident(o): read_live(dyn, o) for o in pending}
        for name, obj in live.items():
            failed = obj is not None and obj.kind == "Job" and _condition(obj, "Failed")
            if failed and failed.get("status") == "True":
                raise JobFailed(f"{name} failed{_why(obj)}")
        pending = [o for o in pending if not ready(live[ident(o)])]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not ready after {int(timeout)}s: "
                               + ", ".join(ident(o) + _why(live[ident(o)]) for o in pending))
        delay = next(delays)
        if stop is None:
            time.sleep(delay)
        elif stop.wait(delay):
            raise WaitStopped("stopped while waiting for " + ", ".join(ident(o) for o in pending))


def backends(obj: Obj) -> list[tuple[str, str]]:
    """``(namespace, name)`` of the Services a webhook configuration or an APIService calls (none: a URL, or served
    by the API server itself)."""
    if obj["kind"] == "APIService":
        configs = [(obj.get("spec") or {}).get("service")]
    else:
        configs = [(w.get("clientConfig") or {}).get("service") for w in obj.get("webhooks") or []]
    return list(dict.fromkeys((c.get("namespace") or "", c.get("name") or "") for c in configs if c))


def serving(dyn: DynamicClient, namespace: str, service: str) -> bool:
    """Whether a Service has a ready endpoint (its EndpointSlices, as kube-proxy and the API server's proxy read
    them)."""
    try:
        slices = dyn.resources.get(api_version="discovery.k8s.io/v1", kind="EndpointSlice").get(
            namespace=namespace, label_selector=f"kubernetes.io/service-name={service}").items
    except NotFoundError:
        return False
    return any((e.conditions or {}).get("ready") is not False for s in slices for e in s.endpoints or [])


def wait_serving(dyn: DynamicClient, services: list[tuple[str, str]], timeout: float = 120) -> list[tuple[str, str]]:
    """Wait until each of ``services`` has a ready endpoint (a webhook or APIService registered before its backend
    answers fails, or with failurePolicy Ignore skips, every call meanwhile), at most ``timeout`` seconds; returns
    those that have none by then."""
    deadline = time.monotonic() + timeout
    pending = list(services)
    for delay in backoff(first=0.25):
        pending = [(ns, name) for ns, name in pending if not serving(dyn, ns, name)]
        if not pending or time.monotonic() > deadline:
            return pending
        time.sleep(delay)
    raise AssertionError("backoff() never ends")


def read_live(dyn: DynamicClient, obj: Obj) -> Any:
    try:
        return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).get(
            name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
    except NotFoundError:
        return None
