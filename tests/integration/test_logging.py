"""The logging module (role logging) through the engine on the simulated cluster, with an external OpenSearch (so
the opensearch module applies only its curator): install (the fluent-bit CRs for the nodes' runtime, the
logsidecar-injector Available before its webhook, status), a replicas change (only logging re-runs, the
certificate is kept), logsidecar off (only logging re-runs, the injector and its webhook go, the pipeline stays),
logging off (its CRs go, another module's Input stays, fluentbit goes with its last consumer, status cleared),
and on again."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_objects import delete_namespace
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import MODULE_LABEL

from .conftest import Installer, between_cleanups

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-logging-system"
GROUP, VERSION = "logging.kubesphere.io", "v1alpha2"
WEBHOOK = "logsidecar-injector-admission-mutate"
DEPLOY = "logsidecar-injector-deploy"
CERTS = "logsidecar-injector-admission-certs"
# The kwok nodes report containerd: the cri parser, the containerd journal and the containerd Filter.
CRS = {("Input", "tail"), ("Input", "containerd"), ("Input", "kubelet"), ("Filter", "kubernetes"),
       ("Filter", "systemd"), ("Filter", "containerd"), ("Output", "opensearch")}
PIPELINE = {f"ConfigMap/{NS}/fluent-bit-containerd-config"}
INJECTOR = {f"{kind}/{NS}/{name}" for kind, name in (
    ("ConfigMap", "logsidecar-injector-configmap"), ("Service", "logsidecar-injector-admission"),
    ("Deployment", DEPLOY), ("Secret", CERTS))}
EXTERNAL = {"enabled": True, "externalOpensearchHost": "search.example.com", "externalOpensearchPort": 9201}
OTHER_INPUT = "tail-events-of-another-module"


def spec(enabled: bool = True, sidecar: bool = True, replicas: int = 1) -> dict[str, Any]:
    return {"logging": {"enabled": enabled, "logsidecar": {"enabled": sidecar, "replicas": replicas}},
            "common__opensearch": EXTERNAL}


def _clean(api: client.ApiClient) -> None:
    with contextlib.suppress(ApiException):
        client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(WEBHOOK)
    delete_namespace(api, NS)


@pytest.fixture
def logging(installer: Installer) -> Iterator[Installer]:
    yield from between_cleanups(installer, _clean)


def crs(api: client.ApiClient, module: str = "logging") -> set[tuple[str, str]]:
    custom = client.CustomObjectsApi(api)
    out = set()
    for kind in ("Input", "Filter", "Output"):
        try:
            items = custom.list_namespaced_custom_object(GROUP, VERSION, NS, kind.lower() + "s",
                                                         label_selector=f"{MODULE_LABEL}={module}")["items"]
        except ApiException as exc:
            if exc.status == 404:
                continue
            raise
        out |= {(kind, i["metadata"]["name"]) for i in items}
    return out


def webhook(api: client.ApiClient) -> Any:
    try:
        return client.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(WEBHOOK)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def objects(installer: Installer) -> set[str]:
    return set(installer.module_objects().get("logging", {}))


def certificate(api: client.ApiClient) -> dict[str, str]:
    return client.CoreV1Api(api).read_namespaced_secret(CERTS, NS).data or {}


def assert_installed(installer: Installer, replicas: int = 1) -> None:
    api = installer.api
    assert objects(installer) == PIPELINE | INJECTOR
    assert crs(api) == CRS
    output = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, NS, "outputs", "opensearch")
    assert output["spec"]["opensearch"]["host"] == "search.example.com"
    assert output["spec"]["opensearch"]["port"] == 9201
    deploy = client.AppsV1Api(api).read_namespaced_deployment(DEPLOY, NS)
    assert deploy.spec.replicas == replicas and deploy.status.available_replicas == replicas
    hook = webhook(api)
    assert hook is not None and hook.metadata.labels[MODULE_LABEL] == "logging"
    (entry,) = hook.webhooks
    assert entry.failure_policy == "Fail"
    data = certificate(api)
    assert {"server.crt", "server.key"} <= data.keys()
    assert entry.client_config.ca_bundle == data["ca.crt"]
    assert base64.b64decode(data["server.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
    status = installer.status()
    assert status["logging"]["status"] == "enabled" and status["logging"]["enabledTime"]


def test_logging_install_change_logsidecar_off_uninstall_and_reenable(logging: Installer) -> None:
    api = logging.api
    logging.apply_cc(**spec())
    assert {"fluentbit", "opensearch", "logging"} <= set(logging.reconcile_ok())
    assert_installed(logging)
    cert = certificate(api)

    # A replicas change re-runs logging alone; the certificate is kept.
    logging.apply_cc(**spec(replicas=2))
    assert logging.reconcile_ok() == ["logging"]
    assert_installed(logging, replicas=2)
    assert certificate(api) == cert

    # logsidecar off: the webhook, the injector and its certificate go; the log pipeline stays.
    logging.apply_cc(**spec(sidecar=False))
    assert logging.reconcile_ok() == ["logging"]
    assert webhook(api) is None
    assert objects(logging) == PIPELINE
    assert crs(api) == CRS
    assert logging.status()["logging"]["status"] == "enabled"

    # Another module's Input in the namespace (events', say) before logging goes.
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Input",
            "metadata": {"name": OTHER_INPUT, "labels": {MODULE_LABEL: "events",
                                                         "logging.kubesphere.io/enabled": "true"}},
            "spec": {"tail": {"tag": "kube_events", "path": "/var/log/containers/*events-exporter*.log"}}}
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, NS, "inputs", body)

    # logging off: its CRs go, the other module's Input stays (and with it the namespace); fluentbit, which no
    # other consumer needs, goes too. Status cleared.
    logging.apply_cc(**spec(enabled=False, sidecar=False))
    assert {"logging", "fluentbit"} <= set(logging.reconcile_ok())
    assert logging.leftovers("logging") == set()
    assert crs(api) == set()
    assert crs(api, "events") == {("Input", OTHER_INPUT)}
    fluentbits = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, NS, "fluentbits")
    assert fluentbits["items"] == []
    status = logging.status()
    assert "logging" not in status and status["modules"]["logging"]["phase"] == "Uninstalled"

    # On again, with the injector.
    logging.apply_cc(**spec())
    assert "logging" in logging.reconcile_ok()
    assert_installed(logging)
