"""The installer shares its objects with the cluster as Flux and Argo CD do: what honest neighbours write where the
render is silent survives a drift check and a run of the module; what controllers rewrite in the render's fields
(a webhook's failurePolicy, a scale) re-runs nothing at a drift check and is set back by the module's next run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from installer.settings import NAMESPACE

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
WEBHOOK = "users.iam.kubesphere.io"
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"


def _neighbours(api: client.ApiClient) -> None:
    """Writes real tools make, each with the tool's own field manager."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.patch_namespaced_service_account("kubesphere", NAMESPACE, {"imagePullSecrets": [{"name": "registry"}]},
                                          field_manager="kubectl-patch")
    core.patch_namespaced_service("ks-console", NAMESPACE, {"metadata": {
        "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
        "finalizers": [FINALIZER]}}, field_manager="cloud-controller-manager")
    core.patch_namespaced_service("ks-console", NAMESPACE, {"metadata": {"annotations": {
        "external-dns.alpha.kubernetes.io/hostname": "ks.example.com"}}}, field_manager="external-dns")
    apps.patch_namespaced_deployment("ks-console", NAMESPACE, {"spec": {"template": {"metadata": {"labels": {
        "sidecar.istio.io/inject": "true"}}}}}, field_manager="istioctl")
    apps.patch_namespaced_deployment("ks-console", NAMESPACE, {"spec": {"paused": True}},
                                     field_manager="kubectl-rollout")
    apps.patch_namespaced_deployment("ks-apiserver", NAMESPACE, {"metadata": {"labels": {"team": "platform"}}},
                                     field_manager="kubectl-label")
    apps.patch_namespaced_deployment("ks-apiserver", NAMESPACE, {"metadata": {"annotations": {
        "reloader.stakater.com/auto": "true"}}}, field_manager="kubectl-annotate")
    core.patch_namespaced_config_map("kubesphere-config", NAMESPACE, {"metadata": {"annotations": {
        "backup.velero.io/backup-volumes": "none"}}}, field_manager="velero")
    client.AdmissionregistrationV1Api(api).patch_validating_webhook_configuration(WEBHOOK, {"metadata": {
        "annotations": {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/ks-controller-manager"}}},
        field_manager="cert-manager-cainjector")


def _kept(api: client.ApiClient) -> dict[str, bool]:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    sa = core.read_namespaced_service_account("kubesphere", NAMESPACE)
    svc = core.read_namespaced_service("ks-console", NAMESPACE).metadata
    console = apps.read_namespaced_deployment("ks-console", NAMESPACE)
    apiserver = apps.read_namespaced_deployment("ks-apiserver", NAMESPACE).metadata
    config = core.read_namespaced_config_map("kubesphere-config", NAMESPACE).metadata
    hook = client.AdmissionregistrationV1Api(api).read_validating_webhook_configuration(WEBHOOK).metadata
    return {
        "imagePullSecrets": [s.name for s in sa.image_pull_secrets or []] == ["registry"],
        "load balancer annotation": (svc.annotations or {}).get("service.beta.kubernetes.io/aws-load-balancer-type")
        == "nlb",
        "finalizer": FINALIZER in (svc.finalizers or []),
        "external-dns annotation": "external-dns.alpha.kubernetes.io/hostname" in (svc.annotations or {}),
        "mesh injection label": (console.spec.template.metadata.labels or {}).get("sidecar.istio.io/inject")
        == "true",
        "rollout pause": bool(console.spec.paused),
        "team label": (apiserver.labels or {}).get("team") == "platform",
        "reloader annotation": "reloader.stakater.com/auto" in (apiserver.annotations or {}),
        "velero annotation": "backup.velero.io/backup-volumes" in (config.annotations or {}),
        "cert-manager annotation": "cert-manager.io/inject-ca-from" in (hook.annotations or {}),
    }


def _undo(api: client.ApiClient) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.patch_namespaced_service("ks-console", NAMESPACE, {"metadata": {"finalizers": None}})
    apps.patch_namespaced_deployment("ks-console", NAMESPACE, {"spec": {"paused": False}},
                                     field_manager="kubectl-rollout")


@pytest.fixture
def neighbours(installer: Installer) -> Iterator[Installer]:
    yield installer
    _undo(installer.api)


def test_honest_neighbours_writes_survive_a_drift_check_and_a_run_of_the_module(neighbours: Installer) -> None:
    installer = neighbours
    api = installer.api
    apps = client.AppsV1Api(api)
    admission = client.AdmissionregistrationV1Api(api)
    _neighbours(api)
    rendered = apps.read_namespaced_deployment("ks-apiserver", NAMESPACE).spec.replicas
    apps.patch_namespaced_deployment_scale("ks-apiserver", NAMESPACE, {"spec": {"replicas": rendered + 2}},
                                           field_manager="kubectl-scale")
    hook = admission.read_validating_webhook_configuration(WEBHOOK)
    policy = hook.webhooks[0].failure_policy
    flipped = "Fail" if policy == "Ignore" else "Ignore"
    admission.patch_validating_webhook_configuration(WEBHOOK, [{"op": "replace", "path": "/webhooks/0/failurePolicy",
                                                                "value": flipped}])

    quiet = installer.reconcile("--check-drift")
    assert quiet.returncode == 0, quiet.stderr[-4000:]
    assert "Drift" not in quiet.stderr and installer.ran(quiet) == [], quiet.stderr[-4000:]
    assert all(_kept(api).values()), _kept(api)
    assert apps.read_namespaced_deployment("ks-apiserver", NAMESPACE).spec.replicas == rendered + 2
    assert admission.read_validating_webhook_configuration(WEBHOOK).webhooks[0].failure_policy == flipped

    again = installer.reconcile("--all")
    assert again.returncode == 0, again.stderr[-4000:]
    assert "ks-core" in installer.ran(again)
    assert "removed fields of manager" not in again.stderr, again.stderr[-4000:]
    assert all(_kept(api).values()), _kept(api)
    # In the fields the render sets, the module's run sets the render's value again.
    assert apps.read_namespaced_deployment("ks-apiserver", NAMESPACE).spec.replicas == rendered
    assert admission.read_validating_webhook_configuration(WEBHOOK).webhooks[0].failure_policy == policy


def test_an_object_a_user_opted_out_is_left_as_it_is(neighbours: Installer) -> None:
    installer = neighbours
    apps = client.AppsV1Api(installer.api)
    apps.patch_namespaced_deployment("ks-apiserver", NAMESPACE, {"metadata": {"annotations": {
        "installer.kubesphere.io/ssa": "IfNotPresent"}}}, field_manager="kubectl-annotate")
    scaled = apps.read_namespaced_deployment("ks-apiserver", NAMESPACE).spec.replicas + 1
    apps.patch_namespaced_deployment_scale("ks-apiserver", NAMESPACE, {"spec": {"replicas": scaled}},
                                           field_manager="horizontal-pod-autoscaler")
    try:
        proc = installer.reconcile("--all")
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert (f"[ks-core] Deployment/{NAMESPACE}/ks-apiserver: left as it is (installer.kubesphere.io/ssa: "
                "IfNotPresent)") in proc.stderr
        assert apps.read_namespaced_deployment("ks-apiserver", NAMESPACE).spec.replicas == scaled
    finally:
        apps.patch_namespaced_deployment("ks-apiserver", NAMESPACE, {"metadata": {"annotations": {
            "installer.kubesphere.io/ssa": None}}})
        apps.patch_namespaced_deployment_scale("ks-apiserver", NAMESPACE, {"spec": {"replicas": scaled - 1}},
                                               field_manager="horizontal-pod-autoscaler")
