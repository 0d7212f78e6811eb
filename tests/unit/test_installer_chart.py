"""The installer's Helm chart: its default rendering is deploy/kubesphere-installer.yaml; values do what they say."""

from __future__ import annotations

from typing import Any

import installer_manifest
import pytest
import yaml

from installer.version import INSTALLER_IMAGE

pytestmark = pytest.mark.tools  # helm renders the chart


def objects(*helm_args: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(installer_manifest.render(*helm_args)) if d and d["kind"] not in
            ("ClusterRoleBinding", "Role", "RoleBinding")}


def test_the_manifest_is_the_charts_default_rendering() -> None:
    assert installer_manifest.main(["--check"]) == 0
    (container,) = objects()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == INSTALLER_IMAGE


def test_values_set_image_resources_scheduling_and_the_cc() -> None:
    rendered = objects("--set", "image.repository=reg.local/mirror/ks-installer", "--set", "image.tag=3.4.1-fix",
                       "--set", "maxParallel=2", "--set", "resources.limits.memory=2Gi",
                       "--set", "nodeSelector.role=infra", "--set", "clusterConfiguration.create=true",
                       "--set", "clusterConfiguration.spec.logging.enabled=true", "--set", "namespace.create=false")
    pod = rendered["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "reg.local/mirror/ks-installer:3.4.1-fix"
    assert {"name": "KS_MAX_PARALLEL", "value": "2"} in container["env"]
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert pod["nodeSelector"] == {"role": "infra"}
    cc = rendered["ClusterConfiguration"]
    assert (cc["metadata"]["name"], cc["metadata"]["namespace"]) == ("ks-installer", "kubesphere-system")
    assert cc["spec"] == {"logging": {"enabled": True}}
    assert cc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert "Namespace" not in rendered


def test_uninstall_keeps_what_kubesphere_lives_on() -> None:
    rendered = objects()
    for kind in ("Namespace", "CustomResourceDefinition"):
        assert rendered[kind]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", kind
    assert "ClusterConfiguration" not in rendered
