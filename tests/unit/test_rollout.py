"""When a Deployment counts as rolled out (installer.manifests.ready)."""

from __future__ import annotations

from typing import Any

from kubernetes.dynamic.resource import ResourceInstance

from installer.manifests import ready as rolled_out


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
