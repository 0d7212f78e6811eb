"""The gatekeeper module through the engine on the simulated cluster: install (Deployments Available, the webhook
registered after them, the namespace labelled as upstream's hook did), a resources change that re-runs gatekeeper
alone, uninstall (the webhook and everything else gone, the CRDs and a user's ConstraintTemplate kept), re-enable."""

from __future__ import annotations

import pytest
from cluster_objects import delete_namespace
from kubernetes import client

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "gatekeeper-system"
WEBHOOK = "gatekeeper-validating-webhook-configuration"
DEPLOYMENTS = ("gatekeeper-controller-manager", "gatekeeper-audit")
TEMPLATE = {"apiVersion": "templates.gatekeeper.sh/v1beta1", "kind": "ConstraintTemplate",
            "metadata": {"name": "k8srequiredlabels"},
            "spec": {"crd": {"spec": {"names": {"kind": "K8sRequiredLabels"}}},
                     "targets": [{"target": "admission.k8s.gatekeeper.sh", "rego": "package k8srequiredlabels"}]}}


def webhooks(api: client.ApiClient) -> set[str]:
    admission = client.AdmissionregistrationV1Api(api)
    return {w.metadata.name for w in admission.list_validating_webhook_configuration().items}


def assert_installed(installer: Installer) -> None:
    apps = client.AppsV1Api(installer.api)
    for name in DEPLOYMENTS:
        assert apps.read_namespaced_deployment(name, NS).status.available_replicas, name
    assert apps.read_namespaced_deployment("gatekeeper-controller-manager", NS).spec.replicas == 3
    assert WEBHOOK in webhooks(installer.api)
    labels = client.CoreV1Api(installer.api).read_namespace(NS).metadata.labels
    assert labels["admission.gatekeeper.sh/ignore"] == "no-self-managing"
    status = installer.status()
    assert status["gatekeeper"]["status"] == "enabled" and status["gatekeeper"]["enabledTime"]


def test_gatekeeper_install_change_uninstall_and_reenable(installer: Installer) -> None:
    delete_namespace(installer.api, NS)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    installer.apply_cc(gatekeeper={"enabled": True})
    assert "gatekeeper" in installer.reconcile_ok()
    assert_installed(installer)

    resources = {"limits": {"memory": "1Gi"}}
    installer.apply_cc(gatekeeper={"enabled": True, "controller_manager": {"resources": resources}})
    assert installer.reconcile_ok() == ["gatekeeper"]
    container = client.AppsV1Api(installer.api).read_namespaced_deployment(
        "gatekeeper-controller-manager", NS).spec.template.spec.containers[0]
    assert container.resources.limits["memory"] == "1Gi"

    # A policy a user wrote: a custom resource of the module's CRD, not the module's.
    custom = client.CustomObjectsApi(installer.api)
    custom.create_cluster_custom_object("templates.gatekeeper.sh", "v1beta1", "constrainttemplates", TEMPLATE)
    installer.apply_cc(gatekeeper={"enabled": False})
    assert installer.reconcile_ok() == ["gatekeeper"]
    assert installer.leftovers("gatekeeper") == set()
    assert WEBHOOK not in webhooks(installer.api)
    kept = {k.split("/")[0] for k in installer.module_objects().get("gatekeeper", {})}
    assert kept == {"CustomResourceDefinition"}
    assert custom.get_cluster_custom_object("templates.gatekeeper.sh", "v1beta1", "constrainttemplates",
                                            "k8srequiredlabels")
    assert "gatekeeper" not in installer.status()

    installer.apply_cc(gatekeeper={"enabled": True})
    assert installer.reconcile_ok() == ["gatekeeper"]
    assert_installed(installer)
    custom.delete_cluster_custom_object("templates.gatekeeper.sh", "v1beta1", "constrainttemplates",
                                        "k8srequiredlabels")
