"""The openldap module (role openldap) through the engine on the simulated cluster: install, a volume size
change, uninstall (the PVC and the password Secret stay), the reinstall devops asks for, and a volume that
predates the Secret."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from cluster_objects import delete_quietly
from kubernetes import client

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-system"
SECRET = "openldap-secret"
PVC = "openldap-pvc-openldap-0"
WORKLOAD = {"ConfigMap/kubesphere-system/openldap-bootstrap", "Service/kubesphere-system/openldap",
            "StatefulSet/kubesphere-system/openldap"}
KEPT = {f"Secret/{NS}/{SECRET}"}


def _clean(api: client.ApiClient) -> None:
    """Remove what the module leaves behind (the Secret and the PVC) and any object of an earlier run."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    delete_quietly(lambda: apps.delete_namespaced_stateful_set("openldap", NS),
                   lambda: core.delete_namespaced_service("openldap", NS),
                   lambda: core.delete_namespaced_config_map("openldap-bootstrap", NS),
                   lambda: core.delete_namespaced_secret(SECRET, NS),
                   lambda: core.delete_namespaced_persistent_volume_claim(PVC, NS))


@pytest.fixture
def ldap(installer: Installer) -> Iterator[Installer]:
    _clean(installer.api)
    yield installer
    _clean(installer.api)


def password(api: client.ApiClient) -> tuple[str, str]:
    """The stored password and the Secret's resourceVersion."""
    secret = client.CoreV1Api(api).read_namespaced_secret(SECRET, NS)
    return base64.b64decode(secret.data["password"]).decode(), secret.metadata.resource_version


def claim_size(api: client.ApiClient) -> str:
    sts = client.AppsV1Api(api).read_namespaced_stateful_set("openldap", NS)
    return sts.spec.volume_claim_templates[0].spec.resources.requests["storage"]


def test_openldap_install_resize_uninstall_and_devops_reinstall(ldap: Installer) -> None:
    api = ldap.api
    ldap.apply_cc(common__openldap={"enabled": True, "volumeSize": "2Gi"})
    assert "openldap" in ldap.reconcile_ok()
    assert set(ldap.module_objects()["openldap"]) == WORKLOAD | KEPT
    sts = client.AppsV1Api(api).read_namespaced_stateful_set("openldap", NS)
    assert sts.status.ready_replicas == 1
    env = {e.name: e for e in sts.spec.template.spec.containers[0].env}
    assert env["LDAP_ADMIN_PASSWORD"].value_from.secret_key_ref.name == SECRET
    assert env["LDAP_ADMIN_PASSWORD"].value is None
    pvc = client.CoreV1Api(api).read_namespaced_persistent_volume_claim(PVC, NS)
    assert pvc.spec.resources.requests["storage"] == "2Gi"
    status = ldap.status()
    assert status["openldap"]["status"] == "enabled" and status["openldap"]["enabledTime"]
    secret, version = password(api)
    assert len(secret) == 24 and secret.isalpha()
    assert secret not in (ldap.results / "openldap" / "stdout").read_text()

    # Only openldap re-runs; the claim template of the existing StatefulSet and the password stay.
    ldap.apply_cc(common__openldap={"enabled": True, "volumeSize": "5Gi"})
    assert ldap.reconcile_ok() == ["openldap"]
    assert claim_size(api) == "2Gi"
    assert password(api) == (secret, version)

    ldap.apply_cc(common__openldap={"enabled": False, "volumeSize": "5Gi"})
    assert ldap.reconcile_ok() == ["ks-config", "openldap"]
    assert set(ldap.module_objects()["openldap"]) == KEPT
    client.CoreV1Api(api).read_namespaced_persistent_volume_claim(PVC, NS)  # kept with its data
    assert "openldap" not in ldap.status()
    assert ldap.status()["modules"]["openldap"]["phase"] == "Uninstalled"

    # devops needs openldap: it comes back with the kept volume and password.
    ldap.apply_cc(common__openldap={"enabled": False, "volumeSize": "5Gi"}, devops={"enabled": True})
    assert "openldap" in ldap.reconcile_ok()
    assert set(ldap.module_objects()["openldap"]) == WORKLOAD | KEPT
    assert client.AppsV1Api(api).read_namespaced_stateful_set("openldap", NS).status.ready_replicas == 1
    assert ldap.status()["openldap"]["status"] == "enabled"
    assert password(api) == (secret, version)

    # A volume without the Secret was initialised by the original installer with its chart's password.
    client.CoreV1Api(api).delete_namespaced_secret(SECRET, NS)
    ldap.apply_cc(common__openldap={"enabled": False, "volumeSize": "6Gi"}, devops={"enabled": True})
    assert ldap.reconcile_ok() == ["openldap"]
    assert password(api)[0] == "admin"
    assert set(ldap.module_objects()["openldap"]) == WORKLOAD | KEPT
