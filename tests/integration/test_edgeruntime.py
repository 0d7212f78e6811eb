"""The edgeruntime module through the engine on the simulated cluster: install (cloudcore and edgeservice
Available, the stream certificate generated, cloudcore advertised at a node's address when the cc gives none), a
NodePort change that re-runs edgeruntime alone and keeps the certificate, uninstall (all gone but the CRDs),
re-enable."""

from __future__ import annotations

import base64

import pytest
import yaml
from cluster_objects import delete_namespace
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubeedge"


def edge(enabled: bool = True, **cloud_core: object) -> dict[str, object]:
    return {"enabled": enabled, "kubeedge": {"enabled": enabled, "cloudCore": cloud_core}}


def certificate(api: client.ApiClient) -> dict[str, str] | None:
    try:
        return client.CoreV1Api(api).read_namespaced_secret("cloudcore", NS).data
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def assert_installed(installer: Installer) -> None:
    apps, core = client.AppsV1Api(installer.api), client.CoreV1Api(installer.api)
    for name in ("cloudcore", "edgeservice"):
        assert apps.read_namespaced_deployment(name, NS).status.available_replicas == 1, name
    assert apps.read_namespaced_daemon_set("cloud-iptables-manager", NS)
    data = certificate(installer.api)
    assert data and sorted(data) == ["stream.crt", "stream.key", "streamCA.crt"]
    assert b"BEGIN CERTIFICATE" in base64.b64decode(data["streamCA.crt"])
    config = yaml.safe_load(core.read_namespaced_config_map("cloudcore", NS).data["cloudcore.yaml"])
    nodes = {a.address for n in core.list_node().items for a in n.status.addresses if a.type == "InternalIP"}
    assert config["modules"]["cloudHub"]["advertiseAddress"][0] in nodes
    status = installer.status()
    assert status["edgeruntime"]["status"] == "enabled" and status["edgeruntime"]["enabledTime"]


def test_edgeruntime_install_change_uninstall_and_reenable(installer: Installer) -> None:
    delete_namespace(installer.api, NS)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    installer.apply_cc(edgeruntime=edge())
    ran = installer.reconcile_ok()
    assert "edgeruntime" in ran
    assert_installed(installer)
    cert = certificate(installer.api)

    installer.apply_cc(edgeruntime=edge(service={"cloudhubNodePort": "31000"}))
    assert installer.reconcile_ok() == ["edgeruntime"]
    ports = client.CoreV1Api(installer.api).read_namespaced_service("cloudcore", NS).spec.ports
    assert [p.node_port for p in ports] == [31000, 30001, 30002, 30003, 30004]
    assert certificate(installer.api) == cert  # kept while valid

    # Both switches off, as KubeSphere documents: kubesphere.yaml drops its edgeruntime section too.
    installer.apply_cc(edgeruntime=edge(False, service={"cloudhubNodePort": "31000"}))
    assert installer.reconcile_ok() == ["edgeruntime", "ks-config"]
    assert installer.leftovers("edgeruntime") == set() and certificate(installer.api) is None
    kept = {k.split("/")[0] for k in installer.module_objects().get("edgeruntime", {})}
    assert kept == {"CustomResourceDefinition"}
    assert "edgeruntime" not in installer.status()

    installer.apply_cc(edgeruntime=edge())
    assert installer.reconcile_ok() == ["edgeruntime", "ks-config"]
    assert_installed(installer)
