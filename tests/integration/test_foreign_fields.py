"""Fields another field manager added to the installer's objects end removed by its apply, whatever the manager's
name; allow-listed ones (a scale, a caBundle) stay; a ServiceAccount planted before install is created anew."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_objects import delete_quietly
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from installer.objects.manifests import Manifests

pytestmark = pytest.mark.cluster


def _deployment(ns: str, replicas: int | None = 1) -> dict:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "d"}}, "template": {
        "metadata": {"labels": {"app": "d"}},
        "spec": {"serviceAccountName": "sa", "containers": [{"name": "main", "image": "example.invalid/c:1"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": ns}, "spec": spec}


def _objects(ns: str, replicas: int | None = 1) -> list[dict]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": ns}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}, "data": {"k": "1"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": ns},
         "spec": {"selector": {"app": "d"}, "ports": [{"name": "http", "port": 80}]}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"{ns}-r"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": f"{ns}-w"},
         "webhooks": [_webhook("users.iam.kubesphere.io", ns, "ks-controller-manager")]},
        _deployment(ns, replicas),
    ]


def _webhook(name: str, ns: str, service: str, resources: tuple[str, ...] = ("users",)) -> dict:
    return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
            "clientConfig": {"service": {"name": service, "namespace": ns, "path": "/validate"}},
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                       "resources": list(resources)}]}


@pytest.fixture
def module(kube_api: client.ApiClient) -> Iterator[tuple[Manifests, str]]:
    tag = uuid.uuid4().hex[:6]
    ns = f"t-foreign-{tag}"
    manifests = Manifests(kube_api, f"mod-{tag}")
    yield manifests, ns
    manifests.delete(_objects(ns), purge=True, timeout=60)
    delete_quietly(lambda: client.CoreV1Api(kube_api).delete_namespace(ns))


SIDECAR = {"spec": {"hostNetwork": True, "hostPID": True, "template": {"spec": {
    "hostNetwork": True, "hostPID": True,
    "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    "containers": [{"name": "main", "env": [{"name": "LD_PRELOAD", "value": "/evil.so"}],
                    "securityContext": {"privileged": True}},
                   {"name": "sidecar", "image": "example.invalid/evil:1",
                    "volumeMounts": [{"name": "root", "mountPath": "/host"}]}]}}}}


def _apply_as(api: client.ApiClient, manager: str, body: dict) -> None:
    res = DynamicClient(api).resources.get(api_version=body["apiVersion"], kind=body["kind"])
    meta = body["metadata"]
    res.server_side_apply(body=body, name=meta["name"], namespace=meta.get("namespace"), field_manager=manager,
                          force_conflicts=True)


@pytest.mark.parametrize("manager", ["x", "kube-controller-manager", "kubelet", "ks-installer-rollout"])
def test_fields_another_manager_added_are_removed_by_the_next_apply(
        kube_api: client.ApiClient, module: tuple[Manifests, str], manager: str) -> None:
    manifests, ns = module
    objects = _objects(ns)
    manifests.apply(objects)
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    pod = SIDECAR["spec"]["template"]
    _apply_as(kube_api, manager, {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "metadata": {"name": "d", "namespace": ns}, "spec": {"template": pod}})
    _apply_as(kube_api, manager, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "c", "namespace": ns, "labels": {"extra": "1"}}, "data": {"extra": "1"}})
    core.patch_namespaced_service("s", ns, {"spec": {"externalIPs": ["203.0.113.9"]}}, field_manager=manager)
    _apply_as(kube_api, manager, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                  "metadata": {"name": f"{ns}-r", "annotations": {"a": "b"}}})
    _apply_as(kube_api, manager, {"apiVersion": "admissionregistration.k8s.io/v1",
                                  "kind": "ValidatingWebhookConfiguration", "metadata": {"name": f"{ns}-w"},
                                  "webhooks": [_webhook("steal.example.com", ns, "thief", ("secrets",))]})
    assert len(apps.read_namespaced_deployment("d", ns).spec.template.spec.containers) == 2

    result = manifests.apply(objects)

    dep = apps.read_namespaced_deployment("d", ns).spec.template.spec
    assert [c.name for c in dep.containers] == ["main"]
    assert dep.containers[0].env is None and dep.containers[0].security_context is None
    assert not dep.host_network and not dep.host_pid and dep.volumes is None
    config = core.read_namespaced_config_map("c", ns)
    assert config.data == {"k": "1"} and "extra" not in config.metadata.labels
    assert core.read_namespaced_service("s", ns).spec.external_i_ps is None
    admission = client.AdmissionregistrationV1Api(kube_api)
    assert [w.name for w in admission.read_validating_webhook_configuration(f"{ns}-w").webhooks] == [
        "users.iam.kubesphere.io"]
    lines = "\n".join(result.foreign)
    assert (f"Deployment/{ns}/d: removed fields of manager {manager}: spec.template.spec.containers[main].env"
            "[LD_PRELOAD], spec.template.spec.containers[main].securityContext") in lines
    assert "spec.template.spec.containers[sidecar]" in lines and "spec.template.spec.hostNetwork" in lines
    assert f"ConfigMap/{ns}/c: removed fields of manager {manager}: data.extra, metadata.labels.extra" in lines
    assert f"Service/{ns}/s: removed fields of manager {manager}: spec.externalIPs" in lines
    assert f"ValidatingWebhookConfiguration/{ns}-w: removed fields of manager {manager}: " \
           "webhooks[steal.example.com]" in lines
    assert "/evil.so" not in lines and "203.0.113.9" not in lines  # values are never shown

    again = manifests.apply(objects)
    assert again.changed == [] and again.foreign == []


def test_a_scale_and_an_injected_ca_bundle_are_kept(kube_api: client.ApiClient,
                                                    module: tuple[Manifests, str]) -> None:
    manifests, ns = module
    objects = _objects(ns, replicas=None)
    manifests.apply(objects)
    apps = client.AppsV1Api(kube_api)
    apps.patch_namespaced_deployment_scale("d", ns, {"spec": {"replicas": 3}}, field_manager="autoscaler")
    _apply_as(kube_api, "cainjector", {"apiVersion": "admissionregistration.k8s.io/v1",
                                       "kind": "ValidatingWebhookConfiguration", "metadata": {"name": f"{ns}-w"},
                                       "webhooks": [{"name": "users.iam.kubesphere.io",
                                                     "clientConfig": {"caBundle": "Y2E="}}]})
    result = manifests.apply(objects)
    assert result.foreign == [] and result.changed == []
    assert apps.read_namespaced_deployment("d", ns).spec.replicas == 3
    hook = client.AdmissionregistrationV1Api(kube_api).read_validating_webhook_configuration(f"{ns}-w").webhooks[0]
    assert hook.client_config.ca_bundle == "Y2E="


def test_a_forged_date_on_the_installers_entry_does_not_hide_an_edit(kube_api: client.ApiClient,
                                                                     module: tuple[Manifests, str]) -> None:
    manifests, ns = module
    objects = _objects(ns)
    manifests.apply(objects)
    core = client.CoreV1Api(kube_api)
    core.patch_namespaced_config_map("c", ns, {"data": {"k": "edited", "more": "x"}}, field_manager="kubectl-patch")
    live = core.read_namespaced_config_map("c", ns)
    entries = [e.to_dict() for e in live.metadata.managed_fields]
    for entry in entries:
        entry["time"] = "2099-01-01T00:00:00Z" if entry["manager"] == "ks-installer" else "2000-01-01T00:00:00Z"
    patch = [{"op": "replace", "path": "/metadata/managedFields",
              "value": [{"manager": e["manager"], "operation": e["operation"], "apiVersion": e["api_version"],
                         "time": e["time"], "fieldsType": "FieldsV1", "fieldsV1": e["fields_v1"]} for e in entries]}]
    DynamicClient(kube_api).resources.get(api_version="v1", kind="ConfigMap").patch(
        body=patch, name="c", namespace=ns, content_type="application/json-patch+json")

    result = manifests.apply(objects)
    assert core.read_namespaced_config_map("c", ns).data == {"k": "1"}
    assert f"ConfigMap/{ns}/c: removed fields of manager kubectl-patch: data.more" in result.foreign


def test_a_planted_service_account_is_created_anew(kube_api: client.ApiClient, module: tuple[Manifests, str]) -> None:
    manifests, ns = module
    core = client.CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": ns}})
    planted = core.create_namespaced_service_account(ns, {"metadata": {"name": "sa"}})
    result = manifests.apply(_objects(ns))
    live = core.read_namespaced_service_account("sa", ns)
    assert live.metadata.uid != planted.metadata.uid
    assert (f"ServiceAccount/{ns}/sa: not made by module {manifests.module} nor by the original installer: "
            "deleted and created again, so tokens minted for it no longer work") in result.foreign
    assert manifests.apply(_objects(ns)).foreign == []
    assert core.read_namespaced_service_account("sa", ns).metadata.uid == live.metadata.uid
