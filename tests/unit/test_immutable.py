"""Which refusals of the API server mean "this field cannot change" (installer.objects.api_errors.immutable_fields), and
the selector change plan --objects shows for a workload the takeover recreates (installer.objects.manifests)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from installer.objects.api_errors import immutable_fields
from installer.objects.repair import recreate_note, selector_change


def refused(status: int, *causes: tuple[str, str]) -> ApiException:
    exc = ApiException(status=status, reason="Invalid")
    exc.body = json.dumps({"kind": "Status", "reason": "Invalid", "details": {
        "causes": [{"reason": "FieldValueInvalid", "field": f, "message": m} for f, m in causes]}})
    return exc


def test_immutable_fields() -> None:
    selector = ("spec.selector", 'Invalid value: v1.LabelSelector{...}: field is immutable')
    statefulset = ("spec", "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                           "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                           "'minReadySeconds' are forbidden")
    cluster_ip = ("spec.clusterIPs[0]", 'Invalid value: []string{"None"}: may not change once set')
    assert immutable_fields(refused(422, selector)) == ["spec.selector"]
    assert immutable_fields(refused(422, statefulset)) == ["spec"]
    assert immutable_fields(refused(422, cluster_ip, cluster_ip)) == ["spec.clusterIPs[0]"]
    # Another cause with it (a merged env entry): recreating would not help, the refusal stands.
    env = ("spec.template.spec.containers[0].env[2].valueFrom", "Invalid value: \"\": may not be specified when "
                                                                  "`value` is not empty")
    assert immutable_fields(refused(422, selector, env)) == []
    assert immutable_fields(refused(409, selector)) == []
    assert immutable_fields(refused(422)) == []


def deployment(selector: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Deployment", "spec": {"selector": selector}}


def test_selector_change() -> None:
    theirs = deployment({"matchLabels": {"app": "a", "heritage": "Helm"}})
    ours = deployment({"matchLabels": {"app": "a"}})
    assert selector_change(theirs, ours) == ('spec.selector: {"matchLabels":{"app":"a","heritage":"Helm"}} -> '
                                             '{"matchLabels":{"app":"a"}}')
    assert selector_change(ours, deployment({"matchLabels": {"app": "a"}, "matchExpressions": []})) is None
    assert selector_change(theirs, {"kind": "Service", "spec": {"selector": {"app": "a"}}}) is None
    assert recreate_note("Deployment", ["spec.selector"]) == (
        "spec.selector cannot change: deleted and created again by the run; its pods are left to the new one")
    assert recreate_note("Job", ["spec.template"]) == \
        "spec.template cannot change: deleted and created again by the run"
