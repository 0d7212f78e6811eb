"""The opensearch module (role opensearch) through the engine on the simulated cluster (3 nodes): the internal
cluster for logging, the dashboard and new credentials later, the switch to an external OpenSearch (the internal
StatefulSets go, their volumes stay), logging off (everything goes but the volumes), and logging on again after
the namespace was deleted by hand. Only this module's objects are checked: logging and fluentbit are others'."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from cluster_objects import delete_namespace
from kubernetes import client

from installer.settings import MODULE_LABEL

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-logging-system"
MASTER, DATA = "opensearch-cluster-master", "opensearch-cluster-data"
CURATOR = "opensearch-logging-curator-opensearch-curator"
DASHBOARD = "opensearch-dashboard-opensearch-dashboards"
CLUSTER = {f"{kind}/{NS}/{name}" for group in (MASTER, DATA) for kind, name in (
    ("PodDisruptionBudget", f"{group}-pdb"), ("ConfigMap", f"{group}-config"), ("Service", group),
    ("Service", f"{group}-headless"), ("StatefulSet", group))}
CURATOR_OBJECTS = {f"ConfigMap/{NS}/{CURATOR}-config", f"CronJob/{NS}/{CURATOR}"}
CREDENTIALS = {f"Secret/{NS}/opensearch-credentials"}
DASHBOARD_OBJECTS = {f"{kind}/{NS}/{name}" for kind, name in (
    ("Deployment", DASHBOARD), ("Service", DASHBOARD), ("ServiceAccount", f"{DASHBOARD}-dashboards"),
    ("RoleBinding", f"{DASHBOARD}-dashboards-rolebinding"))}
PVCS = {f"{MASTER}-{MASTER}-0", f"{DATA}-{DATA}-0", f"{DATA}-{DATA}-1"}
# What else a change of common.opensearch may re-run: the modules that read it (the log consumers' output
# settings and kubesphere-config's logging section).
READERS = {"opensearch", "logging", "ks-config"}


def _spec(**opensearch: Any) -> dict[str, Any]:
    return {"logging": {"enabled": True}, "common__opensearch": {"enabled": True, **opensearch}}


def _objects(installer: Installer) -> set[str]:
    """The module's objects, without the namespace (opensearch or fluentbit creates it, whichever runs first)."""
    refs = {ref for ref in installer.module_objects().get("opensearch", {}) if not ref.startswith("Namespace/")}
    selector = f"{MODULE_LABEL}=opensearch"
    pdbs = client.PolicyV1Api(installer.api).list_namespaced_pod_disruption_budget(NS, label_selector=selector)
    jobs = client.BatchV1Api(installer.api).list_namespaced_cron_job(NS, label_selector=selector)
    return refs | {f"PodDisruptionBudget/{NS}/{i.metadata.name}" for i in pdbs.items} \
        | {f"CronJob/{NS}/{i.metadata.name}" for i in jobs.items}


def _pvcs(api: client.ApiClient) -> dict[str, str]:
    items = client.CoreV1Api(api).list_namespaced_persistent_volume_claim(NS).items
    return {p.metadata.name: p.spec.resources.requests["storage"] for p in items}


def _credentials(api: client.ApiClient) -> dict[str, str]:
    secret = client.CoreV1Api(api).read_namespaced_secret("opensearch-credentials", NS)
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


def _curator_config(api: client.ApiClient) -> dict[str, Any]:
    data = client.CoreV1Api(api).read_namespaced_config_map(f"{CURATOR}-config", NS).data
    return yaml.safe_load(data["config.yml"])["client"]


@pytest.fixture
def opensearch(installer: Installer) -> Iterator[Installer]:
    delete_namespace(installer.api, NS)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    yield installer
    delete_namespace(installer.api, NS)


def test_opensearch_internal_dashboard_external_uninstall_and_reinstall(opensearch: Installer) -> None:
    api = opensearch.api
    apps = client.AppsV1Api(api)

    # Install with logging: the internal cluster (3 nodes: 1 master, 2 data), its curator and the credentials.
    opensearch.apply_cc(**_spec(master={"volumeSize": "5Gi"}))
    assert "opensearch" in opensearch.reconcile_ok()
    assert _objects(opensearch) == CLUSTER | CURATOR_OBJECTS | CREDENTIALS
    assert apps.read_namespaced_stateful_set(MASTER, NS).status.ready_replicas == 1
    assert apps.read_namespaced_stateful_set(DATA, NS).status.ready_replicas == 2
    assert _pvcs(api) == {f"{MASTER}-{MASTER}-0": "5Gi", f"{DATA}-{DATA}-0": "20Gi", f"{DATA}-{DATA}-1": "20Gi"}
    assert _credentials(api) == {"username": "admin", "password": "admin"}
    assert _curator_config(api)["http_auth"] == "${HTTP_AUTH}"  # the password stays out of the ConfigMap
    status = opensearch.status()
    assert status["opensearch"]["status"] == "enabled" and status["opensearch"]["enabledTime"]
    assert "admin:admin" not in (opensearch.results / "opensearch" / "stdout").read_text()

    # The dashboard later (upstream could not), with a new password and a new master volume size: only the
    # readers of common.opensearch re-run; the StatefulSet keeps its claim template (immutable).
    opensearch.apply_cc(**_spec(master={"volumeSize": "8Gi"}, dashboard={"enabled": True},
                                basicAuth={"enabled": True, "username": "admin", "password": "n3w-Secret"}))
    ran = opensearch.reconcile_ok()
    assert "opensearch" in ran and set(ran) <= READERS, ran
    assert _objects(opensearch) == CLUSTER | CURATOR_OBJECTS | CREDENTIALS | DASHBOARD_OBJECTS
    assert apps.read_namespaced_deployment(DASHBOARD, NS).status.available_replicas == 1
    claim = apps.read_namespaced_stateful_set(MASTER, NS).spec.volume_claim_templates[0].spec
    assert claim.resources.requests["storage"] == "5Gi"
    assert _credentials(api)["password"] == "n3w-Secret"
    assert "n3w-Secret" not in (opensearch.results / "opensearch" / "stdout").read_text()

    # An external OpenSearch: the internal cluster and the dashboard go, their volumes stay; the curator points
    # at the external host.
    opensearch.apply_cc(**_spec(externalOpensearchHost="search.example.com", externalOpensearchPort=9201,
                                dashboard={"enabled": True}))
    assert "opensearch" in opensearch.reconcile_ok()
    assert _objects(opensearch) == CURATOR_OBJECTS | CREDENTIALS
    assert set(_pvcs(api)) == PVCS
    config = _curator_config(api)
    assert (config["hosts"], config["port"]) == (["search.example.com"], 9201)

    # Logging off: every object goes but the volumes; the status is cleared.
    opensearch.apply_cc(logging={"enabled": False})
    assert "opensearch" in opensearch.reconcile_ok()
    assert _objects(opensearch) == set()
    assert set(_pvcs(api)) == PVCS
    status = opensearch.status()
    assert "opensearch" not in status and status["modules"]["opensearch"]["phase"] == "Uninstalled"

    # The namespace deleted by hand, then logging on again: the internal cluster is back.
    delete_namespace(api, NS)
    opensearch.apply_cc(**_spec())
    assert "opensearch" in opensearch.reconcile_ok()
    assert _objects(opensearch) == CLUSTER | CURATOR_OBJECTS | CREDENTIALS
    assert apps.read_namespaced_stateful_set(DATA, NS).status.ready_replicas == 2
    assert opensearch.status()["opensearch"]["status"] == "enabled"
