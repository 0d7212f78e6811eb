"""The servicemesh module through the engine on the simulated cluster: install (istiod and both operators
Available, the webhooks registered after them without caBundle, the CRs, Secret jaeger-secret, the
istio-injection=disabled labels), a Jaeger resources change that re-runs servicemesh alone, uninstall (CRs, webhooks,
workloads and labels gone, the CRDs kept, status cleared), re-enable.

The log store is an external OpenSearch, so no OpenSearch StatefulSet runs. Servicemesh is switched on after the
rest of the platform is installed: no real istiod answers the injector webhook here, and its failurePolicy (Fail, on
the pods of every namespace without an istio-injection label) would refuse the pods other modules create meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_objects import delete_namespace, delete_webhooks
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.settings import MODULE_LABEL

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "istio-system"
DEPLOYMENTS = ("istiod-1-14-6", "jaeger-operator", "kiali-operator")
WEBHOOKS = {("MutatingWebhookConfiguration", "istio-sidecar-injector-1-14-6"),
            ("MutatingWebhookConfiguration", "istio-revision-tag-default"),
            ("ValidatingWebhookConfiguration", "istio-validator-1-14-6-istio-system"),
            ("ValidatingWebhookConfiguration", "istiod-default-validator")}
LABELLED = ("istio-system", "kube-system", "kubesphere-system")
STORE = {"enabled": True, "externalOpensearchHost": "search.example.com", "externalOpensearchPort": 9200,
         "basicAuth": {"enabled": True, "username": "admin", "password": "m3sh-Secret"}}
KINDS = (("v1", "Namespace"), ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"), ("v1", "ServiceAccount"),
         ("apps/v1", "Deployment"), ("autoscaling/v2", "HorizontalPodAutoscaler"), ("policy/v1", "PodDisruptionBudget"),
         ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
         ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
         ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
         ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
         ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
         ("networking.istio.io/v1alpha3", "EnvoyFilter"), ("install.istio.io/v1alpha1", "IstioOperator"),
         ("jaegertracing.io/v1", "Jaeger"), ("kiali.io/v1alpha1", "Kiali"))



def _spec(**servicemesh: Any) -> dict[str, Any]:
    return {"servicemesh": {"enabled": True, **servicemesh}, "common__opensearch": STORE}


def objects(api: client.ApiClient) -> set[tuple[str, str]]:
    """(kind, name) of every object labelled servicemesh, of the kinds the module applies."""
    dyn = DynamicClient(api)
    out = set()
    for api_version, kind in KINDS:
        try:
            items = dyn.resources.get(api_version=api_version, kind=kind).get(
                label_selector=f"{MODULE_LABEL}=servicemesh").items
        except (ResourceNotFoundError, NotFoundError):
            continue
        out |= {(kind, i.metadata.name) for i in items}
    return out


def injection_labels(api: client.ApiClient) -> dict[str, str | None]:
    core = client.CoreV1Api(api)
    return {ns: (core.read_namespace(ns).metadata.labels or {}).get("istio-injection")
            for ns in LABELLED if ns != NS or core.list_namespace(field_selector=f"metadata.name={NS}").items}


def jaeger(installer: Installer) -> dict[str, Any]:
    return installer.custom.get_namespaced_custom_object("jaegertracing.io", "v1", NS, "jaegers", "jaeger")


def assert_installed(installer: Installer) -> None:
    api = installer.api
    apps = client.AppsV1Api(api)
    for name in DEPLOYMENTS:
        assert apps.read_namespaced_deployment(name, NS).status.available_replicas, name
    found = objects(api)
    assert len(found) == 68 and found >= WEBHOOKS, sorted(found)
    admission = client.AdmissionregistrationV1Api(api)
    injector = admission.read_mutating_webhook_configuration("istio-sidecar-injector-1-14-6")
    # istiod fills the caBundle at run time (the simulated cluster plays it): the installer never sets it
    installer_fields = [json.dumps(m.fields_v1) for m in injector.metadata.managed_fields or []
                        if m.manager.startswith("ks-installer")]
    assert installer_fields and not any("f:caBundle" in f for f in installer_fields), installer_fields
    assert injection_labels(api) == dict.fromkeys(LABELLED, "disabled")
    storage = jaeger(installer)["spec"]["storage"]
    assert storage["options"]["es"]["server-urls"] == "https://search.example.com:9200"
    assert storage["secretName"] == "jaeger-secret"
    assert installer.custom.get_namespaced_custom_object("kiali.io", "v1alpha1", NS, "kialis", "kiali")
    status = installer.status()
    assert status["servicemesh"]["status"] == "enabled" and status["servicemesh"]["enabledTime"]
    assert "m3sh-Secret" not in (installer.results / "servicemesh" / "stdout").read_text()


@pytest.fixture
def mesh(installer: Installer) -> Iterator[Installer]:
    yield installer
    delete_webhooks(installer.api, "servicemesh")


def test_servicemesh_install_change_uninstall_and_reenable(mesh: Installer) -> None:
    installer = mesh
    api = installer.api
    delete_namespace(api, NS)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    installer.apply_cc(common__opensearch=STORE)
    installer.reconcile_ok()

    # servicemesh pulls in opensearch (the curator of the external store Jaeger writes to) and re-runs ks-config
    # and monitoring, which changes nothing but Istio's two monitors.
    monitoring = installer.module_objects()["monitoring"]
    installer.apply_cc(**_spec())
    assert installer.reconcile_ok() == ["ks-config", "monitoring", "opensearch", "servicemesh"]
    assert_installed(installer)
    changed = {k for k, version in installer.module_objects()["monitoring"].items() if monitoring.get(k) != version}
    assert changed == {f"PodMonitor/{NS}/envoy-stats-monitor", f"ServiceMonitor/{NS}/istio-component-monitor"}

    resources = {"limits": {"memory": "1Gi"}}
    installer.apply_cc(**_spec(jaeger={"resources": resources}))
    assert installer.reconcile_ok() == ["servicemesh"]
    assert jaeger(installer)["spec"]["collector"]["resources"]["limits"] == {"cpu": "100m", "memory": "1Gi"}

    installer.apply_cc(servicemesh={"enabled": False}, common__opensearch=STORE)
    assert "servicemesh" in installer.reconcile_ok()
    assert {kind for kind, _ in objects(api)} == {"CustomResourceDefinition"}
    assert len(objects(api)) == 17
    assert injection_labels(api) == {"kube-system": None, "kubesphere-system": None}
    assert "servicemesh" not in installer.status()

    installer.apply_cc(**_spec())
    assert "servicemesh" in installer.reconcile_ok()
    assert_installed(installer)
