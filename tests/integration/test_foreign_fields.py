"""What other writers add to the installer's objects: kept where the render is silent (labels, annotations,
finalizers, a scale, a caBundle, ``imagePullSecrets``), removed where only the installer decides (containers, volumes,
webhook items, RBAC rules, Service ports), whatever the writer's name; ownership from UIDs: an object the module did
not make is made anew or left alone, never deleted."""

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
    steal = _webhook("steal.example.com", ns, "thief", ("secrets",))
    steal["clientConfig"]["caBundle"] = "Y2E="  # a leaf a cainjector may own does not keep the item
    _apply_as(kube_api, manager, {"apiVersion": "admissionregistration.k8s.io/v1",
                                  "kind": "ValidatingWebhookConfiguration", "metadata": {"name": f"{ns}-w"},
                                  "webhooks": [steal]})
    _apply_as(kube_api, manager, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": ns},
                                  "spec": {"type": "NodePort", "ports": [{"name": "ssh", "port": 22,
                                                                          "nodePort": 30022}]}})
    assert len(apps.read_namespaced_deployment("d", ns).spec.template.spec.containers) == 2

    result = manifests.apply(objects)

    dep = apps.read_namespaced_deployment("d", ns).spec.template.spec
    assert [c.name for c in dep.containers] == ["main"]
    assert dep.containers[0].env is None and dep.containers[0].security_context is None
    assert not dep.host_network and not dep.host_pid and dep.volumes is None
    config = core.read_namespaced_config_map("c", ns)
    assert config.data == {"k": "1", "extra": "1"} and config.metadata.labels["extra"] == "1"  # not the render's
    service = core.read_namespaced_service("s", ns).spec
    assert service.external_i_ps is None and [p.port for p in service.ports] == [80]
    admission = client.AdmissionregistrationV1Api(kube_api)
    assert [w.name for w in admission.read_validating_webhook_configuration(f"{ns}-w").webhooks] == [
        "users.iam.kubesphere.io"]
    lines = "\n".join(result.foreign)
    assert (f"Deployment/{ns}/d: removed fields of manager {manager}: spec.template.spec.containers[main].env"
            "[LD_PRELOAD], spec.template.spec.containers[main].securityContext") in lines
    assert "spec.template.spec.containers[sidecar]" in lines and "spec.template.spec.hostNetwork" in lines
    assert f"ConfigMap/{ns}/c" not in lines and f"ClusterRole/{ns}-r" not in lines
    assert (f"Service/{ns}/s: removed fields of manager {manager}: spec.externalIPs, "
            "spec.ports[port=22,protocol=TCP]") in lines
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
    assert core.read_namespaced_config_map("c", ns).data == {"k": "1", "more": "x"}  # the render's value; theirs kept
    assert f"ConfigMap/{ns}/c" in result.changed


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


def test_a_service_account_planted_with_the_module_label_is_made_anew_and_its_users_restart(
        kube_api: client.ApiClient, module: tuple[Manifests, str]) -> None:
    """Without a record (a first install, a state reset), a label and the installer's field manager make no
    ServiceAccount the module's: it is made anew, and the render's workloads running as it restart (their pods'
    tokens were the old one's); the restart stays through the next apply."""
    manifests, ns = module
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    manifests.apply(_objects(ns))
    core.delete_namespaced_service_account("sa", ns)
    planted = core.create_namespaced_service_account(ns, {"metadata": {
        "name": "sa", "labels": {"installer.kubesphere.io/module": manifests.module}}}, field_manager="ks-installer")
    result = Manifests(kube_api, manifests.module, facts={}).apply(_objects(ns))
    live = core.read_namespaced_service_account("sa", ns)
    assert live.metadata.uid != planted.metadata.uid
    assert f"ServiceAccount/{ns}/sa: not made by module {manifests.module} nor by the original installer: " \
           "deleted and created again, so tokens minted for it no longer work" in result.foreign
    assert f"Deployment/{ns}/d: restarted, its ServiceAccount sa being made anew" in result.foreign
    template = apps.read_namespaced_deployment("d", ns).spec.template.metadata
    restarted = (template.annotations or {}).get("kubectl.kubernetes.io/restartedAt")
    assert restarted
    again = Manifests(kube_api, manifests.module, facts=result.facts).apply(_objects(ns))
    assert again.foreign == [] and f"Deployment/{ns}/d" not in again.changed, (again.foreign, again.changed)
    assert core.read_namespaced_service_account("sa", ns).metadata.uid == live.metadata.uid
    assert apps.read_namespaced_deployment("d", ns).spec.template.metadata.annotations[
        "kubectl.kubernetes.io/restartedAt"] == restarted


def test_what_honest_neighbours_add_where_the_render_is_silent_survives_the_next_apply(
        kube_api: client.ApiClient, module: tuple[Manifests, str]) -> None:
    manifests, ns = module
    objects = _objects(ns, replicas=None)
    first = manifests.apply(objects)
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    core.patch_namespaced_service_account("sa", ns, {"imagePullSecrets": [{"name": "registry"}]},
                                          field_manager="kubectl-patch")
    core.patch_namespaced_service("s", ns, {"metadata": {
        "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                        "external-dns.alpha.kubernetes.io/hostname": "ks.example.com"},
        "finalizers": ["service.kubernetes.io/load-balancer-cleanup"]}}, field_manager="cloud-controller-manager")
    apps.patch_namespaced_deployment("d", ns, {"metadata": {"labels": {"team": "a"}, "annotations": {
        "backup.velero.io/backup-volumes": "data"}}, "spec": {"paused": True, "template": {"metadata": {
            "labels": {"sidecar.istio.io/inject": "true"}}}}}, field_manager="kubectl")
    apps.patch_namespaced_deployment_scale("d", ns, {"spec": {"replicas": 3}},
                                           field_manager="horizontal-pod-autoscaler")

    again = Manifests(kube_api, manifests.module, facts=first.facts).apply(objects)

    assert again.foreign == []
    assert core.read_namespaced_service_account("sa", ns).image_pull_secrets[0].name == "registry"
    svc = core.read_namespaced_service("s", ns).metadata
    assert svc.annotations["service.beta.kubernetes.io/aws-load-balancer-type"] == "nlb"
    assert svc.finalizers == ["service.kubernetes.io/load-balancer-cleanup"]
    dep = apps.read_namespaced_deployment("d", ns)
    assert dep.metadata.labels["team"] == "a" and dep.spec.paused and dep.spec.replicas == 3
    assert dep.spec.template.metadata.labels["sidecar.istio.io/inject"] == "true"
    core.patch_namespaced_service("s", ns, {"metadata": {"finalizers": None}})


def test_content_written_under_the_installers_own_name_is_repaired(kube_api: client.ApiClient,
                                                                   module: tuple[Manifests, str]) -> None:
    manifests, ns = module
    objects = _objects(ns)
    first = manifests.apply(objects)
    forged = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": ns},
              "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
                  "metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
                  {"name": "main", "image": "example.invalid/evil:1",
                   "env": [{"name": "LD_PRELOAD", "value": "/evil.so"}]},
                  {"name": "sidecar", "image": "example.invalid/evil:1"}]}}}}
    _apply_as(kube_api, "ks-installer", forged)  # its own manager name: the metadata cannot tell

    result = Manifests(kube_api, manifests.module, facts=first.facts).apply(objects)

    spec = client.AppsV1Api(kube_api).read_namespaced_deployment("d", ns).spec.template.spec
    assert [(c.name, c.image, c.env) for c in spec.containers] == [("main", "example.invalid/c:1", None)]
    assert f"Deployment/{ns}/d" in result.changed


def test_a_prune_deletes_only_the_object_the_module_made(kube_api: client.ApiClient,
                                                         module: tuple[Manifests, str]) -> None:
    manifests, ns = module
    objects = _objects(ns)
    first = manifests.apply(objects)
    core = client.CoreV1Api(kube_api)
    core.delete_namespaced_config_map("c", ns)
    theirs = core.create_namespaced_config_map(ns, {"metadata": {"name": "c", "labels": {
        "installer.kubesphere.io/module": manifests.module}}, "data": {"theirs": "1"}}, field_manager="ks-installer")
    owner = Manifests(kube_api, manifests.module, facts=first.facts)

    pruned = owner.prune_inventory([tuple(r) for r in first.applied_refs], [])

    assert core.read_namespaced_config_map("c", ns).metadata.uid == theirs.metadata.uid
    assert f"ConfigMap/{ns}/c: not the object the installer made (another UID)" in pruned.spared
    assert f"Deployment/{ns}/d" in pruned.deleted


def test_an_install_never_prunes_a_cluster_scoped_object_by_its_label(kube_api: client.ApiClient,
                                                                     module: tuple[Manifests, str]) -> None:
    manifests, ns = module
    rbac = client.RbacAuthorizationV1Api(kube_api)
    name = f"{ns}-victim"
    rbac.create_cluster_role_binding({"metadata": {"name": name, "labels": {
        "installer.kubesphere.io/module": manifests.module}}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "x", "apiGroup": "rbac.authorization.k8s.io"}]},
        field_manager="ks-installer")
    try:
        base = manifests.prune_base([], install=True)
        assert not [r for r in base if r[3] == name]
        assert f"ClusterRoleBinding/{name}" not in manifests.uninstall(None, timeout=60).deleted
        rbac.read_cluster_role_binding(name)
    finally:
        delete_quietly(lambda: rbac.delete_cluster_role_binding(name))


def test_an_uninstall_without_a_record_deletes_only_what_it_would_leave_dangling(
        kube_api: client.ApiClient, module: tuple[Manifests, str]) -> None:
    """After a state reset: of the module's cluster-scoped objects, only an APIService (or webhook configuration)
    whose every backend is a Service the uninstall deletes goes; one that calls a URL or another Service stays."""
    manifests, ns = module
    group = f"{ns}.example.com"
    apiservice = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": f"v1.{group}"},
                  "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 100,
                           "insecureSkipTLSVerify": True, "service": {"name": "s", "namespace": ns, "port": 80}}}
    by_url = {**_webhook("by-url.example.com", ns, "s"), "clientConfig": {"url": "https://127.0.0.1:1/validate"}}
    url_hook = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": f"{ns}-url"}, "webhooks": [by_url]}
    registration, admission = client.ApiregistrationV1Api(kube_api), client.AdmissionregistrationV1Api(kube_api)
    try:
        manifests.apply([*_objects(ns), apiservice, url_hook])
        gone = manifests.uninstall(None, timeout=60)
        assert f"APIService/v1.{group}" in gone.deleted and f"Service/{ns}/s" in gone.deleted, gone.deleted
        assert not registration.list_api_service(field_selector=f"metadata.name=v1.{group}").items
        for kept in (f"ValidatingWebhookConfiguration/{ns}-url", f"ValidatingWebhookConfiguration/{ns}-w",
                     f"ClusterRole/{ns}-r"):
            assert any(line.startswith(f"{kept}: cluster-scoped") for line in gone.spared), (kept, gone.spared)
        admission.read_validating_webhook_configuration(f"{ns}-url")
    finally:
        delete_quietly(lambda: registration.delete_api_service(f"v1.{group}"),
                       lambda: admission.delete_validating_webhook_configuration(f"{ns}-url"))
