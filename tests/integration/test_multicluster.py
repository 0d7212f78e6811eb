"""The multicluster module (a host cluster: tower + KubeFed) through the engine on the simulated cluster: install
(the three Deployments Available, the webhooks registered with the serving certificate's CA, the federated types,
the conversion caBundle from ks-core's CA, status and kubesphere-config), a change of multicluster's fields that
re-runs it and ks-config alone (the webhooks of the first run in place), uninstall (everything gone but the CRDs
and a FederatedWorkspace KubeSphere made, status cleared, kubesphere-config back to a standalone cluster), and
host again.

host -> none is refused while a member cluster is joined (its Cluster object, other than the host's own), and
carried out once it is gone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from cluster_objects import delete_namespace, delete_webhooks
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kube-federation-system"
KS = "kubesphere-system"
DEPLOYMENTS = [(NS, "kubefed-controller-manager"), (NS, "kubefed-admission-webhook"), (KS, "tower")]
WEBHOOKS = ("validations.core.kubefed.io", "mutation.core.kubefed.io")
CERT = "kubefed-admission-webhook-serving-cert"
WORKSPACE = {"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedWorkspace",
             "metadata": {"name": "ks-test-workspace"}, "spec": {"placement": {"clusterSelector": {}}}}
CLUSTER = {"apiVersion": "cluster.kubesphere.io/v1alpha1", "kind": "Cluster", "spec": {"connection": {"type": "proxy"}}}


def join(api: client.ApiClient, name: str, labels: dict[str, str] | None = None) -> None:
    """A Cluster object as ks-controller-manager makes one (the host's own carries the host label)."""
    body = {**CLUSTER, "metadata": {"name": name, "labels": labels or {}}}
    client.CustomObjectsApi(api).create_cluster_custom_object("cluster.kubesphere.io", "v1alpha1", "clusters", body)


def unjoin(api: client.ApiClient, *names: str) -> None:
    for name in names:
        with contextlib.suppress(ApiException):
            client.CustomObjectsApi(api).delete_cluster_custom_object("cluster.kubesphere.io", "v1alpha1", "clusters",
                                                                      name)


def multicluster_config(api: client.ApiClient) -> dict[str, Any]:
    data = client.CoreV1Api(api).read_namespaced_config_map("kubesphere-config", KS).data["kubesphere.yaml"]
    return yaml.safe_load(data)["multicluster"]


def webhooks(api: client.ApiClient) -> dict[str, Any]:
    admission = client.AdmissionregistrationV1Api(api)
    found = [*admission.list_validating_webhook_configuration().items,
             *admission.list_mutating_webhook_configuration().items]
    return {w.metadata.name: w for w in found if w.metadata.name in WEBHOOKS}


def custom(api: client.ApiClient, group: str, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
    objects = client.CustomObjectsApi(api)
    try:
        found = (objects.list_namespaced_custom_object(group, "v1beta1", namespace, plural) if namespace
                 else objects.list_cluster_custom_object(group, "v1beta1", plural))
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise
    return found["items"]


def assert_installed(installer: Installer) -> None:
    api = installer.api
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    for namespace, name in DEPLOYMENTS:
        assert apps.read_namespaced_deployment(name, namespace).status.available_replicas, name
    assert core.read_namespaced_service("tower", KS).spec.type == "LoadBalancer"
    assert core.read_namespace(NS).metadata.labels["kubesphere.io/workspace"] == "system-workspace"
    ca = core.read_namespaced_secret(CERT, NS).data["ca.crt"]
    registered = webhooks(api)
    assert set(registered) == set(WEBHOOKS)
    assert all(w.client_config.ca_bundle == ca for hook in registered.values() for w in hook.webhooks)
    assert len(custom(api, "core.kubefed.io", "federatedtypeconfigs", NS)) == 28
    assert [c["metadata"]["name"] for c in custom(api, "core.kubefed.io", "kubefedconfigs", NS)] == ["kubefed"]
    assert custom(api, "types.kubefed.io", "federatednamespaces", "kubesphere-monitoring-federated")
    core_ca = core.read_namespaced_secret("ks-controller-manager-webhook-cert", KS).data["ca.crt"]
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(
        "federatednotificationreceivers.types.kubefed.io")
    assert crd.spec.conversion.webhook.client_config.ca_bundle == core_ca
    status = installer.status()
    assert status["multicluster"]["status"] == "enabled" and status["multicluster"]["enabledTime"]
    config = multicluster_config(api)
    assert config["clusterRole"] == "host" and config["enable"] is True
    assert config["proxyPublishService"] == "tower.kubesphere-system.svc"


def forget_workspace(api: client.ApiClient) -> None:
    with contextlib.suppress(ApiException):
        client.CustomObjectsApi(api).delete_cluster_custom_object("types.kubefed.io", "v1beta1", "federatedworkspaces",
                                                                  WORKSPACE["metadata"]["name"])


@pytest.fixture
def host(installer: Installer) -> Iterator[Installer]:
    forget_workspace(installer.api)
    delete_namespace(installer.api, NS)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    yield installer
    forget_workspace(installer.api)
    unjoin(installer.api, "host", "member-1")
    delete_webhooks(installer.api, "multicluster")  # nothing serves them here


def test_multicluster_install_change_uninstall_and_reenable(host: Installer) -> None:
    installer, api = host, host.api
    installer.apply_cc(multicluster={"clusterRole": "host"})
    assert "multicluster" in installer.reconcile_ok()
    assert_installed(installer)

    # multicluster's own fields: its scheduling and what kubesphere-config says (ks-config reads the section too).
    tolerations = [{"key": "ks-test", "operator": "Exists", "effect": "NoSchedule"}]
    installer.apply_cc(multicluster={"clusterRole": "host", "proxyPublishAddress": "https://tower.example.com:8080",
                                     "tolerations": tolerations})
    assert installer.reconcile_ok() == ["ks-config", "multicluster"]
    apps = client.AppsV1Api(api)
    for namespace, name in DEPLOYMENTS:
        spec = apps.read_namespaced_deployment(name, namespace).spec.template.spec
        assert [t.key for t in spec.tolerations or []] == ["ks-test"], name
    assert multicluster_config(api)["proxyPublishAddress"] == "https://tower.example.com:8080"
    assert_installed(installer)

    # A FederatedWorkspace, as ks-controller-manager makes one for each workspace of a host: kept with its CRD.
    objects = client.CustomObjectsApi(api)
    objects.create_cluster_custom_object("types.kubefed.io", "v1beta1", "federatedworkspaces", WORKSPACE)
    # A joined member: host -> none is refused, and nothing changes.
    join(api, "host", {"cluster-role.kubesphere.io/host": ""})
    join(api, "member-1")
    before = installer.module_objects()
    installer.apply_cc(multicluster={"clusterRole": "none"})
    proc = installer.reconcile()
    assert proc.returncode == 1 and installer.ran(proc) == []
    stalled = installer.condition("Stalled")
    assert stalled["reason"] == "MembersJoined" and "member clusters are joined to this host (member-1)" in stalled[
        "message"]
    assert "member-1" in proc.stderr and installer.module_objects() == before
    assert multicluster_config(api)["clusterRole"] == "host"

    # Once the member is removed, the same spec uninstalls the host's objects.
    unjoin(api, "member-1")
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert installer.ran(proc) == ["ks-config", "multicluster"]
    assert installer.condition("Stalled")["status"] == "False"
    assert installer.leftovers("multicluster") == set()
    assert webhooks(api) == {}
    kept = {k.split("/")[0] for k in installer.module_objects().get("multicluster", {})}
    assert kept == {"CustomResourceDefinition"}
    assert len(installer.module_objects()["multicluster"]) == 35
    assert objects.get_cluster_custom_object("types.kubefed.io", "v1beta1", "federatedworkspaces", "ks-test-workspace")
    assert "multicluster" not in installer.status()
    assert multicluster_config(api) == {"clusterRole": "none"}
    namespace = client.CoreV1Api(api).read_namespace("kubesphere-monitoring-federated")  # preinstall's: it stays
    assert namespace.status.phase == "Active"

    installer.apply_cc(multicluster={"clusterRole": "host"})
    assert installer.reconcile_ok() == ["ks-config", "multicluster"]
    assert_installed(installer)
