"""The installer's Helm chart on the simulated cluster: install over objects a kubectl apply made (adopted), upgrade
with new values, uninstall that keeps the namespace, the CRD and the cc."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from installer_manifest import CHART, adopt
from kubernetes import client
from simcluster import tool_path

from installer.settings import NAMESPACE
from installer.version import INSTALLER_IMAGE_REPOSITORY

from .conftest import Installer

pytestmark = pytest.mark.cluster
RELEASE = "ks-installer"


def helm(installer: Installer, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(tool_path("helm")), f"--kubeconfig={installer.kubeconfig}", *args],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


def kubectl(installer: Installer, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={installer.kubeconfig}", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert not check or proc.returncode == 0, proc.stderr
    return proc


def deployment(installer: Installer) -> Any:
    return client.AppsV1Api(installer.api).read_namespaced_deployment("ks-installer", NAMESPACE)


@pytest.mark.versions
def test_chart_install_upgrade_and_uninstall(installer: Installer) -> None:
    # What a user who applied deploy/kubesphere-installer.yaml does before installing the chart (docs/helm.md).
    adopt(lambda *args, check=True: kubectl(installer, *args, check=check), RELEASE, NAMESPACE)
    helm(installer, "upgrade", "--install", RELEASE, str(CHART), "-n", NAMESPACE, "--wait", "--timeout", "120s",
         "--set", "clusterConfiguration.create=true", "--set", "clusterConfiguration.spec.logging.enabled=false")
    assert deployment(installer).status.available_replicas == 1
    assert installer.cc()["spec"] == {"logging": {"enabled": False}}

    helm(installer, "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", "--wait", "--timeout", "120s",
         "--set", "image.tag=3.4.1-fix", "--set", "maxParallel=2")
    container = deployment(installer).spec.template.spec.containers[0]
    assert container.image == f"{INSTALLER_IMAGE_REPOSITORY}:3.4.1-fix"
    assert {e.name: e.value for e in container.env}["KS_MAX_PARALLEL"] == "2"
    history = json.loads(helm(installer, "history", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert [h["status"] for h in history] == ["superseded", "deployed"]

    helm(installer, "uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    assert kubectl(installer, "get", "deployment", "ks-installer", "-n", NAMESPACE, check=False).returncode
    assert kubectl(installer, "get", "clusterrole", "ks-installer", check=False).returncode
    # What KubeSphere lives on stays: its namespace, the CRD and the cc.
    kubectl(installer, "get", "namespace", NAMESPACE)
    kubectl(installer, "get", "crd", "clusterconfigurations.installer.kubesphere.io")
    assert installer.cc()["spec"] == {"logging": {"enabled": False}}
