"""What an apply reports as changed, read from one list per kind instead of a read per object: nothing on a second
apply of the same objects, exactly the edited object after an edit, an adopted object, and a new CRD served at
once (its kind can be applied in the same run); an object that is as applied last is not written again, one that
someone changed (an edit, a scale) or whose manifest changed is. A dry run writes nothing and its change set names
what the apply then does."""

from __future__ import annotations

import contextlib
import threading
import uuid
from typing import Any

import pytest
from cluster_objects import delete_quietly
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from installer.objects import manifests as manifests_module
from installer.objects.api_errors import Rejected
from installer.objects.change_set import Foreseen
from installer.objects.manifests import Manifests
from installer.preview.foresight import Foresight
from installer.settings import APPLIED_ANNOTATION, MODULE_LABEL

pytestmark = pytest.mark.cluster


def _config(ns: str, name: str, value: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"k": value}}


def test_apply_reports_only_what_the_api_server_changed(kube_api: client.ApiClient) -> None:
    tag = uuid.uuid4().hex[:6]
    ns, group = f"t-apply-{tag}", f"t{tag}.example.com"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns},
              "spec": {"size": 1}}
    objects = [namespace, crd, widget, _config(ns, "a", "1"), _config(ns, "b", "1")]
    core = client.CoreV1Api(kube_api)
    manifests = Manifests(kube_api, f"mod-{tag}")
    try:
        first = manifests.apply(objects)
        assert sorted(first.changed) == sorted(first.applied) and len(first.applied) == 5

        again = manifests.apply(objects)
        assert again.changed == [] and sorted(again.applied) == sorted(first.applied)

        edited = manifests.apply([namespace, crd, widget, _config(ns, "a", "2"), _config(ns, "b", "1")])
        assert edited.changed == [f"ConfigMap/{ns}/a"]
        assert core.read_namespaced_config_map("a", ns).data == {"k": "2"}

        # An object someone else made is taken over: the label it gets is a change.
        core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="c"), data={"k": "1"}))
        adopted = manifests.apply([*objects[:3], _config(ns, "a", "2"), _config(ns, "b", "1"), _config(ns, "c", "1")])
        assert adopted.changed == [f"ConfigMap/{ns}/c"]
        assert core.read_namespaced_config_map("c", ns).metadata.labels[MODULE_LABEL] == f"mod-{tag}"
    finally:
        manifests.delete(objects, purge=True, timeout=60)
        delete_quietly(lambda: client.ApiextensionsV1Api(kube_api).delete_custom_resource_definition(
            f"widgets.{group}"))


def test_an_object_being_deleted_is_made_anew_once_gone(kube_api: client.ApiClient,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An object the module applies that is being deleted (a finalizer holds it, as a PVC's while a pod mounts it)
    is not updated on its way out: the run waits until it is gone and creates it anew, or fails naming it and its
    finalizers; a dry run foresees it."""
    tag = uuid.uuid4().hex[:6]
    ns, module, hold = f"t-term-{tag}", f"mod-{tag}", "example.com/hold"
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, _config(ns, "a", "1")]
    core = client.CoreV1Api(kube_api)
    manifests = Manifests(kube_api, module)

    def release() -> None:
        core.patch_namespaced_config_map("a", ns, {"metadata": {"finalizers": None}})

    try:
        manifests.apply(objects)
        first = core.read_namespaced_config_map("a", ns).metadata.uid
        core.patch_namespaced_config_map("a", ns, {"metadata": {"finalizers": [hold]}})
        core.delete_namespaced_config_map("a", ns)

        changes = {c.ref: (c.action, c.note) for c in Foresight(kube_api, module, Foreseen()).apply(objects).changes}
        assert changes[f"ConfigMap/{ns}/a"] == ("recreate", "being deleted: created again once gone"), changes

        monkeypatch.setattr(manifests_module, "TERMINATING_TIMEOUT", 2)
        with pytest.raises(Rejected, match=rf"ConfigMap/{ns}/a is being deleted and is still there after 2s "
                                           rf"\(finalizers: {hold}\)"):
            manifests.apply(objects)
        assert core.read_namespaced_config_map("a", ns).metadata.deletion_timestamp is not None

        monkeypatch.setattr(manifests_module, "TERMINATING_TIMEOUT", 60)
        threading.Timer(1.0, release).start()
        result = manifests.apply(objects)
        live = core.read_namespaced_config_map("a", ns)
        assert live.metadata.uid != first and live.metadata.deletion_timestamp is None
        assert f"ConfigMap/{ns}/a" in result.changed and live.data == {"k": "1"}
    finally:
        with contextlib.suppress(client.ApiException):
            release()
        manifests.delete(objects, purge=True, timeout=60)


def test_a_dry_run_writes_nothing_and_names_what_the_apply_then_does(kube_api: client.ApiClient) -> None:
    tag = uuid.uuid4().hex[:6]
    ns, module = f"t-dry-{tag}", f"mod-{tag}"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    objects = [namespace, _config(ns, "a", "1"), _config(ns, "b", "1")]
    core = client.CoreV1Api(kube_api)
    manifests, preview = Manifests(kube_api, module), Foresight(kube_api, module, Foreseen())
    try:
        new = {c.ref: (c.action, c.note) for c in preview.apply(objects).changes}
        assert new == {f"Namespace/{ns}": ("create", ""),
                       f"ConfigMap/{ns}/a": ("create", f"namespace {ns} is created first"),
                       f"ConfigMap/{ns}/b": ("create", f"namespace {ns} is created first")}
        assert ns not in {n.metadata.name for n in core.list_namespace().items}
        manifests.apply(objects)

        core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="c"), data={"k": "1"}))
        edited = [namespace, _config(ns, "a", "2"), _config(ns, "b", "1"), _config(ns, "c", "1")]
        changes = {c.ref: c for c in preview.apply(edited).changes}
        assert {ref: c.action for ref, c in changes.items()} == {
            f"Namespace/{ns}": "unchanged", f"ConfigMap/{ns}/a": "update", f"ConfigMap/{ns}/b": "unchanged",
            f"ConfigMap/{ns}/c": "update"}
        a = changes[f"ConfigMap/{ns}/a"]
        assert a.live is not None and a.after is not None and (a.live["data"], a.after["data"]) == ({"k": "1"},
                                                                                                      {"k": "2"})
        assert core.read_namespaced_config_map("a", ns).data == {"k": "1"}
        assert MODULE_LABEL not in (core.read_namespaced_config_map("c", ns).metadata.labels or {})
        pruned = preview.remove([_config(ns, "b", "1")])
        assert [(c.ref, c.action) for c in pruned.changes] == [(f"ConfigMap/{ns}/b", "delete")]
        assert core.read_namespaced_config_map("b", ns).data == {"k": "1"}

        assert sorted(manifests.apply(edited).changed) == [f"ConfigMap/{ns}/a", f"ConfigMap/{ns}/c"]
    finally:
        manifests.delete(objects, purge=True, timeout=60)


def test_an_unchanged_object_is_not_written_and_one_someone_changed_is_restored(kube_api: client.ApiClient,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tag = uuid.uuid4().hex[:6]
    ns = f"t-skip-{tag}"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": ns},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": {
                      "metadata": {"labels": {"app": "d"}},
                      "spec": {"containers": [{"name": "c", "image": "example.invalid/c:1"}]}}}}
    objects = [namespace, deployment, _config(ns, "a", "1"), _config(ns, "b", "1")]
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    manifests = Manifests(kube_api, f"mod-{tag}")
    writes: list[str] = []

    def count_writes() -> None:
        apply = DynamicClient.server_side_apply

        def counted(self: DynamicClient, resource: Any, *args: Any, **kwargs: Any) -> Any:
            writes.append(f"{resource.kind}/{kwargs['name']}")
            return apply(self, resource, *args, **kwargs)
        monkeypatch.setattr(DynamicClient, "server_side_apply", counted)

    try:
        manifests.apply(objects)
        version = core.read_namespaced_config_map("a", ns).metadata.resource_version
        assert core.read_namespaced_config_map("a", ns).metadata.annotations[APPLIED_ANNOTATION]
        count_writes()

        again = manifests.apply(objects)
        assert writes == []  # nothing is written, the namespace included
        assert again.changed == [] and len(again.applied) == 4
        assert core.read_namespaced_config_map("a", ns).metadata.resource_version == version

        # Someone edits a field the installer set, another scales the Deployment: both are restored.
        core.patch_namespaced_config_map("a", ns, {"data": {"k": "edited"}})
        apps.patch_namespaced_deployment_scale("d", ns, {"spec": {"replicas": 3}})
        writes.clear()
        restored = manifests.apply(objects)
        assert sorted(writes) == ["ConfigMap/a", "Deployment/d"]
        assert sorted(restored.changed) == [f"ConfigMap/{ns}/a", f"Deployment/{ns}/d"]
        assert core.read_namespaced_config_map("a", ns).data == {"k": "1"}
        assert apps.read_namespaced_deployment("d", ns).spec.replicas == 1

        # A manifest that changes is applied; one whose record was removed is applied again.
        core.patch_namespaced_config_map("b", ns, {"metadata": {"annotations": {APPLIED_ANNOTATION: None}}})
        writes.clear()
        manifests.apply([namespace, deployment, _config(ns, "a", "2"), _config(ns, "b", "1")])
        assert sorted(writes) == ["ConfigMap/a", "ConfigMap/b"]
        assert core.read_namespaced_config_map("a", ns).data == {"k": "2"}
        assert core.read_namespaced_config_map("b", ns).metadata.annotations[APPLIED_ANNOTATION]
    finally:
        manifests.delete(objects, purge=True, timeout=60)


def _served(ns: str, replicas: int) -> list[dict]:
    """A Deployment, its Service and a webhook that calls it, as one role renders them (one apply)."""
    labels = {"app": "hook"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hook", "namespace": ns},
         "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"containers": [{"name": "main", "image": "example.invalid/hook:1"}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook", "namespace": ns},
         "spec": {"selector": labels, "ports": [{"port": 443, "targetPort": 8443}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": f"{ns}-hook"},
         "webhooks": [{"name": "hook.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                       "failurePolicy": "Ignore",
                       "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                       "clientConfig": {"service": {"namespace": ns, "name": "hook", "path": "/validate"}},
                       "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                  "resources": ["configmaps"]}]}]},
    ]


def test_a_webhook_is_registered_once_its_backend_serves(kube_api: client.ApiClient,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """One apply of a workload, its Service and the webhook that calls it: the webhook is written once the Service
    has a ready endpoint; with no replica to serve it, after the wait, with a warning naming the Service. A webhook
    calling a Service the apply does not render is not waited for."""
    tag = uuid.uuid4().hex[:6]
    ns = f"t-backend-{tag}"
    admission = client.AdmissionregistrationV1Api(kube_api)
    manifests = Manifests(kube_api, f"mod-{tag}")
    monkeypatch.setattr(manifests_module, "BACKEND_TIMEOUT", 3)
    hook = f"ValidatingWebhookConfiguration/{ns}-hook"
    try:
        unserved = manifests.apply(_served(ns, replicas=0))
        assert unserved.foreign == [f"{hook}: written although Service {ns}/hook had no ready endpoint after 3s"]
        assert hook in unserved.changed

        monkeypatch.setattr(manifests_module, "BACKEND_TIMEOUT", 120)
        served = _served(ns, replicas=1)
        served[3]["webhooks"][0]["timeoutSeconds"] = 5  # a change: written again, once the Service serves
        result = manifests.apply(served)
        slices = client.DiscoveryV1Api(kube_api).list_namespaced_endpoint_slice(
            ns, label_selector="kubernetes.io/service-name=hook").items
        assert any(e.conditions.ready for s in slices for e in s.endpoints or [])
        assert hook in result.changed and result.foreign == []

        elsewhere = [o for o in _served(ns, replicas=0) if o["kind"] != "Service"]  # calls a Service not rendered
        elsewhere[-1]["webhooks"][0]["timeoutSeconds"] = 7
        monkeypatch.setattr(manifests_module, "BACKEND_TIMEOUT", 60)
        assert manifests.apply(elsewhere).foreign == []  # not waited for (it serves, but is not this apply's)
    finally:
        delete_quietly(lambda: admission.delete_validating_webhook_configuration(f"{ns}-hook"))
        delete_quietly(lambda: client.CoreV1Api(kube_api).delete_namespace(ns))
