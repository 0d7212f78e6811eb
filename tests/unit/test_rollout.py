"""When an object counts as ready (installer.objects.readiness.ready: rolled out, complete, Available) and what the wait
reports when it is not."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.dynamic.resource import ResourceInstance

from installer.objects.readiness import JobFailed, wait_ready
from installer.objects.readiness import ready as rolled_out


def dep(status: dict[str, Any], replicas: int = 2, generation: int = 3) -> ResourceInstance:
    return ResourceInstance(None, {"kind": "Deployment", "metadata": {"generation": generation},
                                   "spec": {"replicas": replicas}, "status": status})


DONE = {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}


def test_complete_rollout() -> None:
    assert rolled_out(dep(DONE))


def test_pending_rollouts() -> None:
    assert not rolled_out(dep({**DONE, "observedGeneration": 2}))  # new template not seen yet
    assert not rolled_out(dep({**DONE, "updatedReplicas": 1}))  # one new pod so far
    assert not rolled_out(dep({**DONE, "replicas": 3}))  # an old pod still there
    assert not rolled_out(dep({**DONE, "availableReplicas": 1}))  # a new pod not available yet
    assert not rolled_out(dep({}))


def test_a_paused_deployment_is_left_to_its_user() -> None:
    paused = dep({**DONE, "updatedReplicas": 1})  # a template change the pause holds back
    paused.spec.paused = True
    assert rolled_out(paused)


def obj(kind: str, conditions: list[dict[str, str]]) -> ResourceInstance:
    return ResourceInstance(None, {"kind": kind, "metadata": {"name": "x", "namespace": "ns"},
                                   "spec": {}, "status": {"conditions": conditions}})


UNAVAILABLE = {"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck",
               "message": "failing or missing response from https://10.0.0.9:443"}


def test_apiservice_ready_when_available() -> None:
    assert rolled_out(obj("APIService", [{"type": "Available", "status": "True"}]))
    assert not rolled_out(obj("APIService", [UNAVAILABLE]))
    assert not rolled_out(obj("APIService", []))


def test_job_ready_when_complete() -> None:
    assert rolled_out(obj("Job", [{"type": "Complete", "status": "True"}]))
    assert not rolled_out(obj("Job", []))
    assert not rolled_out(obj("Job", [{"type": "Failed", "status": "True"}]))


class _Cluster:
    """Answers every read with the object given (the shape of DynamicClient that wait_ready uses)."""

    def __init__(self, live: ResourceInstance) -> None:
        self.resources = self
        self.live = live

    def get(self, **_: Any) -> Any:
        return self if "api_version" in _ else self.live


def ref(kind: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "namespace": "ns"}}


def test_wait_names_the_apiservice_and_the_api_reason() -> None:
    with pytest.raises(TimeoutError, match=r"APIService/ns/x \(FailedDiscoveryCheck: failing or missing"):
        wait_ready(_Cluster(obj("APIService", [UNAVAILABLE])), [ref("APIService")], timeout=0)  # type: ignore[arg-type]


def test_a_failed_job_ends_the_wait_at_once() -> None:
    failed = obj("Job", [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                          "message": "Job has reached the specified backoff limit"}])
    with pytest.raises(JobFailed, match=r"Job/ns/x failed \(BackoffLimitExceeded: Job has reached"):
        wait_ready(_Cluster(failed), [ref("Job")], timeout=600)  # type: ignore[arg-type]
