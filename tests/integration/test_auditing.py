"""The auditing module (role auditing) through the engine on the simulated cluster, with an external OpenSearch
(so the opensearch module deploys only its curator): install (the operator Available, the CRDs established, the
Webhook, the Rules and the fluent-bit pipeline applied, kubesphere-config's auditing section), a change of the
webhook's resources that re-runs auditing alone, uninstall (everything gone but the CRDs, status cleared),
re-enable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cluster_objects import delete_namespace, delete_quietly
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import MODULE_LABEL

from .conftest import Installer, between_cleanups

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-logging-system"
OPERATOR = "kube-auditing-operator"
GROUP, VERSION = "auditing.kubesphere.io", "v1alpha1"
LOGGING_GROUP, LOGGING_VERSION = "logging.kubesphere.io", "v1alpha2"
CRDS = {f"CustomResourceDefinition//{p}.{GROUP}" for p in ("rules", "webhooks")}
INSTALLED = CRDS | {f"{kind}//{OPERATOR}" for kind in ("ClusterRole", "ClusterRoleBinding")} | {
    f"{kind}/{NS}/{OPERATOR}" for kind in ("ServiceAccount", "Deployment")}
# (group, version, plural, namespace or None, name) of the custom resources the module applies.
CUSTOM = {(GROUP, VERSION, "webhooks", None, "kube-auditing-webhook"),
          (GROUP, VERSION, "rules", NS, "archiving-rule"), (GROUP, VERSION, "rules", NS, "alerting-rule"),
          (LOGGING_GROUP, LOGGING_VERSION, "inputs", NS, "tail-auditing"),
          (LOGGING_GROUP, LOGGING_VERSION, "filters", NS, "filter-auditing"),
          (LOGGING_GROUP, LOGGING_VERSION, "outputs", NS, "opensearch-auditing")}
STORE = {"enabled": True, "externalOpensearchHost": "search.example.com"}


def _spec(enabled: bool = True, **auditing: Any) -> dict[str, Any]:
    return {"auditing": {"enabled": enabled, **auditing}, "common__opensearch": STORE}


def custom(api: client.ApiClient, group: str, version: str, plural: str, ns: str | None,
           name: str) -> dict[str, Any] | None:
    objects = client.CustomObjectsApi(api)
    try:
        if ns is None:
            return objects.get_cluster_custom_object(group, version, plural, name)
        return objects.get_namespaced_custom_object(group, version, ns, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _clean(api: client.ApiClient) -> None:
    """Remove what a run leaves behind: the Webhook and cluster RBAC, the namespace; the CRDs stay by design."""
    rbac = client.RbacAuthorizationV1Api(api)
    delete_quietly(lambda: rbac.delete_cluster_role_binding(OPERATOR), lambda: rbac.delete_cluster_role(OPERATOR),
                   lambda: client.CustomObjectsApi(api).delete_cluster_custom_object(
                       GROUP, VERSION, "webhooks", "kube-auditing-webhook"))
    delete_namespace(api, NS)


@pytest.fixture
def auditing(installer: Installer) -> Iterator[Installer]:
    yield from between_cleanups(installer, _clean)


def kubesphere_config(api: client.ApiClient) -> str:
    return client.CoreV1Api(api).read_namespaced_config_map("kubesphere-config", "kubesphere-system").data[
        "kubesphere.yaml"]


def assert_installed(installer: Installer) -> None:
    api = installer.api
    assert set(installer.module_objects().get("auditing", {})) == INSTALLED
    ext = client.ApiextensionsV1Api(api)
    for crd in CRDS:
        conditions = ext.read_custom_resource_definition(crd.rpartition("/")[2]).status.conditions or []
        assert any(c.type == "Established" and c.status == "True" for c in conditions), crd
    assert client.AppsV1Api(api).read_namespaced_deployment(OPERATOR, NS).status.available_replicas == 1
    for ref in CUSTOM:
        cr = custom(api, *ref)
        assert cr is not None and cr["metadata"]["labels"][MODULE_LABEL] == "auditing", ref
    output = custom(api, LOGGING_GROUP, LOGGING_VERSION, "outputs", NS, "opensearch-auditing")
    assert output is not None and output["spec"]["opensearch"]["host"] == "search.example.com"
    status = installer.status()
    assert status["auditing"]["status"] == "enabled" and status["auditing"]["enabledTime"]
    assert "kube-auditing-webhook-svc.kubesphere-logging-system.svc:6443" in kubesphere_config(api)


def test_auditing_install_change_uninstall_and_reenable(auditing: Installer) -> None:
    api = auditing.api
    auditing.apply_cc(**_spec())
    assert "auditing" in auditing.reconcile_ok()
    assert_installed(auditing)
    webhook = custom(api, GROUP, VERSION, "webhooks", None, "kube-auditing-webhook")
    assert webhook is not None and webhook["spec"]["replicas"] == 2 and webhook["spec"]["auditLevel"] == "Metadata"

    # The webhook's resources: auditing alone re-runs, and the operator is told through the Webhook.
    auditing.apply_cc(**_spec(webhook={"resources": {"limits": {"memory": "1Gi"}}}))
    assert auditing.reconcile_ok() == ["auditing"]
    webhook = custom(api, GROUP, VERSION, "webhooks", None, "kube-auditing-webhook")
    assert webhook is not None
    assert webhook["spec"]["resources"]["limits"] == {"cpu": "200m", "memory": "1Gi"}

    # Uninstall: the custom resources, the operator and its RBAC go; the CRDs stay; status and config are cleared.
    auditing.apply_cc(**_spec(enabled=False))
    assert "auditing" in auditing.reconcile_ok()
    assert auditing.leftovers("auditing") == set()
    assert set(auditing.module_objects().get("auditing", {})) == CRDS
    assert all(custom(api, *ref) is None for ref in CUSTOM)
    status = auditing.status()
    assert "auditing" not in status and status["modules"]["auditing"]["phase"] == "Uninstalled"
    assert "kube-auditing-webhook-svc" not in kubesphere_config(api)

    # Re-enable: back.
    auditing.apply_cc(**_spec())
    assert "auditing" in auditing.reconcile_ok()
    assert_installed(auditing)
