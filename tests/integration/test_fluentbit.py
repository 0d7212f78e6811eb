"""The fluentbit module (role fluentbit) through the engine on the simulated cluster: install with logging (the
operator Available, the CRDs established, the FluentBit pipeline applied), the operator wait timing out, a
scheduling change after the namespace was deleted by hand (only fluentbit re-runs, and restores everything),
uninstall (the CRDs and another module's Input stay, and so does the namespace that Input lives in), re-enable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_objects import delete_namespace, delete_quietly
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import MODULE_LABEL

from .conftest import Installer, between_cleanups, playbooks_changed

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-logging-system"
GROUP, VERSION = "logging.kubesphere.io", "v1alpha2"
PLURALS = ("filters", "fluentbits", "fluentbitconfigs", "inputs", "outputs", "parsers")
CRDS = {f"CustomResourceDefinition//{p}.{GROUP}" for p in PLURALS}
RBAC = {f"{kind}//kubesphere:operator:fluentbit-operator" for kind in ("ClusterRole", "ClusterRoleBinding")}
WORKLOAD = {f"{kind}/{NS}/{name}" for kind, name in (
    ("ServiceAccount", "fluentbit-operator"), ("ConfigMap", "fluent-bit-lua"), ("Deployment", "fluentbit-operator"))}
NAMESPACE = {f"Namespace//{NS}"}
INSTALLED = CRDS | RBAC | WORKLOAD | NAMESPACE
# Only the pipeline's two CRs: the engine's cheap object list (tests/cluster_objects.py) has no CR kinds.
PIPELINE = {("fluentbits", "fluent-bit"), ("fluentbitconfigs", "fluent-bit-config")}
# Logging's spec without a log store, so that only fluentbit and the logging placeholder run.
LOGGING_ON = {"logging": {"enabled": True}, "common__opensearch": {"enabled": False}}
LOGGING_OFF = {"logging": {"enabled": False}, "common__opensearch": {"enabled": False}}
OTHER_INPUT = "tail-from-another-module"


def _clean(api: client.ApiClient) -> None:
    """Remove what a run leaves behind: the namespace (with the CRs), cluster RBAC; the CRDs stay by design."""
    rbac = client.RbacAuthorizationV1Api(api)
    delete_quietly(lambda: rbac.delete_cluster_role_binding("kubesphere:operator:fluentbit-operator"),
                   lambda: rbac.delete_cluster_role("kubesphere:operator:fluentbit-operator"))
    delete_namespace(api, NS)


@pytest.fixture
def fluentbit(installer: Installer) -> Iterator[Installer]:
    yield from between_cleanups(installer, _clean)


def objects(installer: Installer) -> set[str]:
    return set(installer.module_objects().get("fluentbit", {}))


def custom(api: client.ApiClient, plural: str, name: str) -> dict[str, Any] | None:
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, NS, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def assert_installed(installer: Installer) -> None:
    api = installer.api
    assert objects(installer) == INSTALLED
    ext = client.ApiextensionsV1Api(api)
    for crd in CRDS:
        conditions = ext.read_custom_resource_definition(crd.rpartition("/")[2]).status.conditions or []
        assert any(c.type == "Established" and c.status == "True" for c in conditions), crd
    deployment = client.AppsV1Api(api).read_namespaced_deployment("fluentbit-operator", NS)
    assert deployment.status.available_replicas == 1
    for plural, name in PIPELINE:
        cr = custom(api, plural, name)
        assert cr is not None and cr["metadata"]["labels"][MODULE_LABEL] == "fluentbit", (plural, name)
    status = installer.status()
    assert status["fluentbit"]["status"] == "enabled" and status["fluentbit"]["enabledTime"]


def test_fluentbit_install_timeout_change_uninstall_and_reenable(fluentbit: Installer, tmp_path: Path) -> None:
    api = fluentbit.api
    apps = client.AppsV1Api(api)
    fluentbit.apply_cc(**LOGGING_ON)
    assert "fluentbit" in fluentbit.reconcile_ok()
    assert_installed(fluentbit)
    # The kwok nodes report containerd: the operator is told the logs are under /var/log.
    init = apps.read_namespaced_deployment("fluentbit-operator", NS).spec.template.spec.init_containers[0]
    assert init.command[-1] == "set -ex; echo CONTAINER_ROOT_DIR=/var/log > /fluentbit-operator/fluent-bit.env"

    # No node matches the operator's nodeSelector: the wait ends in a failed phase that names the Deployment.
    timeout = {"ks_fluentbit_wait_timeout": 4}
    fluentbit.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path, "fluentbit", vars=timeout))
    fluentbit.apply_cc(**LOGGING_ON, common__fluentbit={"nodeSelector": {"ks-test": "nowhere"}})
    assert fluentbit.reconcile().returncode != 0
    del fluentbit.env["KS_PLAYBOOKS_DIR"]
    module = fluentbit.status()["modules"]["fluentbit"]
    assert module["phase"] == "Failed", module
    assert "Deployment/kubesphere-logging-system/fluentbit-operator" in module["message"], module

    # The user deletes the namespace by hand; a scheduling change re-runs fluentbit alone, which brings everything
    # back, the operator on the nodes it selects.
    delete_namespace(api, NS)
    linux = {"kubernetes.io/os": "linux"}
    fluentbit.apply_cc(**LOGGING_ON, common__fluentbit={"nodeSelector": linux})
    assert fluentbit.reconcile_ok() == ["fluentbit"]
    assert_installed(fluentbit)
    deployment = apps.read_namespaced_deployment("fluentbit-operator", NS)
    assert deployment.spec.template.spec.node_selector == linux

    # Another module's Input in the namespace (logging's, say) before uninstall.
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Input",
            "metadata": {"name": OTHER_INPUT, "labels": {MODULE_LABEL: "logging",
                                                         "logging.kubesphere.io/enabled": "true"}},
            "spec": {"tail": {"tag": "kube.*", "path": "/var/log/containers/*.log"}}}
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, NS, "inputs", body)

    # Uninstall: the CRs, the operator and its RBAC go; the CRDs stay, and so do the other module's Input and the
    # namespace it lives in. Status is cleared.
    fluentbit.apply_cc(**LOGGING_OFF, common__fluentbit={"nodeSelector": linux})
    assert "fluentbit" in fluentbit.reconcile_ok()
    assert objects(fluentbit) == CRDS | NAMESPACE
    assert all(custom(api, plural, name) is None for plural, name in PIPELINE)
    assert custom(api, "inputs", OTHER_INPUT) is not None
    status = fluentbit.status()
    assert "fluentbit" not in status and status["modules"]["fluentbit"]["phase"] == "Uninstalled"

    # Re-enable: back.
    fluentbit.apply_cc(**LOGGING_ON, common__fluentbit={"nodeSelector": linux})
    assert "fluentbit" in fluentbit.reconcile_ok()
    assert_installed(fluentbit)
