"""ks-core on the simulated cluster against what ks-installer v3.4.1 created: every upstream kind and count, the
workloads Available, every mounted ConfigMap and Secret present, the admission webhooks served by an endpoint
with a caBundle that verifies the serving certificate, which is kept across runs; ServiceAccount kubesphere's token
as upstream's chart made it at the cluster's version; uninstall removes the webhooks and leaves the built-in
cluster-admin and the system workspace."""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from installer_state import kube_at_least, upstream_kinds
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from installer.settings import MODULE_LABEL, NAMESPACE

from .conftest import Installer
from .test_core_roles import remove_core

pytestmark = [pytest.mark.cluster, pytest.mark.versions]
CONTROLS = "kubesphere-controls-system"
CERT_SECRET = "ks-controller-manager-webhook-cert"
SA_TOKEN = "kubesphere-sa-token"
# Upstream ks-core, v3.4.1 (183 objects, on Kubernetes 1.24 or later): per kind. The built-in ClusterRole
# cluster-admin is annotated, not owned.
UPSTREAM_KINDS = upstream_kinds("ks-core")
KINDS = {
    "RoleBase": "iam.kubesphere.io/v1alpha2", "GlobalRole": "iam.kubesphere.io/v1alpha2",
    "WorkspaceRole": "iam.kubesphere.io/v1alpha2", "GlobalRoleBinding": "iam.kubesphere.io/v1alpha2",
    "User": "iam.kubesphere.io/v1alpha2", "Workspace": "tenant.kubesphere.io/v1alpha1",
    "WorkspaceTemplate": "tenant.kubesphere.io/v1alpha2", "CustomResourceDefinition": "apiextensions.k8s.io/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1", "RoleBinding": "rbac.authorization.k8s.io/v1",
    "ValidatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "Deployment": "apps/v1", "Service": "v1", "ConfigMap": "v1", "Secret": "v1", "ServiceAccount": "v1",
}
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def makes_sa_token(installer: Installer) -> bool:
    """Whether ks-core makes Secret kubesphere-sa-token: from Kubernetes 1.24, as upstream's chart (before, the token
    controller makes the ServiceAccount's token)."""
    return kube_at_least(installer.api, 1, 24)


def check_sa_token(installer: Installer) -> None:
    """ServiceAccount kubesphere's token: kubesphere-sa-token, owned and named by the account, from 1.24; before,
    none of that name, and the account names only the token controller's Secrets."""
    v1 = client.CoreV1Api(installer.api)
    named = [s.name for s in v1.read_namespaced_service_account("kubesphere", NAMESPACE).secrets or []]
    if makes_sa_token(installer):
        token = v1.read_namespaced_secret(SA_TOKEN, NAMESPACE)
        assert token.type == "kubernetes.io/service-account-token"
        assert token.metadata.labels[MODULE_LABEL] == "ks-core"
        assert SA_TOKEN in named
        return
    with pytest.raises(ApiException) as exc:
        v1.read_namespaced_secret(SA_TOKEN, NAMESPACE)
    assert exc.value.status == 404
    assert named and all(n.startswith("kubesphere-token-") for n in named), named
    for name in named:
        token = v1.read_namespaced_secret(name, NAMESPACE)
        assert token.type == "kubernetes.io/service-account-token"
        assert MODULE_LABEL not in (token.metadata.labels or {})


@pytest.fixture
def core(installer: Installer) -> Iterator[Installer]:
    installer.env.update(KS_CONSOLE_TIMEOUT="120")
    remove_core(installer)
    yield installer
    remove_core(installer)


def owned(installer: Installer, kind: str) -> list[Any]:
    res = DynamicClient(installer.api).resources.get(api_version=KINDS[kind], kind=kind)
    return list(res.get(label_selector=f"{MODULE_LABEL}=ks-core").items)


def cert_data(installer: Installer) -> dict[str, bytes]:
    secret = client.CoreV1Api(installer.api).read_namespaced_secret(CERT_SECRET, NAMESPACE)
    assert secret.metadata.labels[MODULE_LABEL] == "ks-core"
    return {k: base64.b64decode(v) for k, v in secret.data.items()}


def check_webhooks(installer: Installer) -> str:
    """Every webhook's Service has ready endpoints and its caBundle verifies the serving certificate for the
    Service's DNS name; the caBundle (they all share it)."""
    data = cert_data(installer)
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)
    bundles = set()
    v1 = client.CoreV1Api(installer.api)
    for kind in WEBHOOK_KINDS:
        for config in owned(installer, kind):
            for webhook in config.webhooks:
                service = webhook.clientConfig.service
                endpoints = v1.read_namespaced_endpoints(service.name, service.namespace)
                assert any(s.addresses for s in endpoints.subsets or []), f"{webhook.name}: no endpoints"
                ca = x509.load_pem_x509_certificate(base64.b64decode(webhook.clientConfig.caBundle))
                cert.verify_directly_issued_by(ca)
                assert f"{service.name}.{service.namespace}.svc" in names
                bundles.add(webhook.clientConfig.caBundle)
    assert len(bundles) == 1
    return bundles.pop()


def test_core_parity(core: Installer) -> None:
    core.apply_cc()
    assert "ks-core" in core.reconcile_ok()

    counts = Counter({kind: len(owned(core, kind)) for kind in UPSTREAM_KINDS})
    expected = Counter(UPSTREAM_KINDS) - Counter({"ClusterRole": 1})  # cluster-admin: annotated, not owned
    if not makes_sa_token(core):
        expected -= Counter({"Secret": 1})
    assert counts == expected
    cluster_admin = client.RbacAuthorizationV1Api(core.api).read_cluster_role("cluster-admin")
    assert "iam.kubesphere.io/aggregation-roles" in cluster_admin.metadata.annotations
    assert MODULE_LABEL not in (cluster_admin.metadata.labels or {})
    assert cluster_admin.metadata.labels["kubernetes.io/bootstrapping"] == "rbac-defaults"

    apps, v1 = client.AppsV1Api(core.api), client.CoreV1Api(core.api)
    deployments = [(NAMESPACE, n) for n in ("ks-apiserver", "ks-console", "ks-controller-manager")]
    for namespace, name in [*deployments, (CONTROLS, "default-http-backend")]:
        dep = apps.read_namespaced_deployment(name, namespace)
        assert dep.status.available_replicas == dep.spec.replicas == 1, name
        for volume in dep.spec.template.spec.volumes or []:
            if volume.config_map:
                v1.read_namespaced_config_map(volume.config_map.name, namespace)
            if volume.secret:
                v1.read_namespaced_secret(volume.secret.secret_name, namespace)
    ca_bundle = check_webhooks(core)
    check_sa_token(core)

    # A re-run keeps the certificate (and so every caBundle).
    data = cert_data(core)
    core.apply_cc(common__core__console__port=30882)
    assert "ks-core" in core.reconcile_ok()
    assert cert_data(core) == data and check_webhooks(core) == ca_bundle

    # Uninstall (with the record the reconcile wrote): webhooks gone, the built-in cluster-admin and the system
    # workspace stay.
    remove_core(core, sweep=False)
    for kind in WEBHOOK_KINDS:
        assert not owned(core, kind)
    with pytest.raises(ApiException):
        v1.read_namespaced_secret(CERT_SECRET, NAMESPACE)
    cluster_admin = client.RbacAuthorizationV1Api(core.api).read_cluster_role("cluster-admin")
    assert "iam.kubesphere.io/aggregation-roles" not in (cluster_admin.metadata.annotations or {})
    assert cluster_admin.rules
    workspaces = client.CustomObjectsApi(core.api).list_cluster_custom_object(
        "tenant.kubesphere.io", "v1alpha1", "workspaces")
    assert [w["metadata"]["name"] for w in workspaces["items"]] == ["system-workspace"]
