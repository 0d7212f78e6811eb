"""What an apply reports as changed, read from one list per kind instead of a read per object: nothing on a second
apply of the same objects, exactly the edited object after an edit, an adopted object, and a new CRD served at
once (its kind can be applied in the same run)."""

from __future__ import annotations

import uuid

import pytest
from cluster_objects import delete_quietly
from kubernetes import client

from installer.manifests import Manifests
from installer.settings import MODULE_LABEL

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
