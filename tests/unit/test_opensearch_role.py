"""The opensearch role's manifests, rendered by Ansible for several specs (no cluster needed): the internal
cluster with the replica rules by node count, the external OpenSearch, the Elasticsearch curator, the dashboard,
registry overrides, kept claims and the scheduling fallbacks."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_harness import Objects, filter_plugins, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
NS = "kubesphere-logging-system"
MASTER, DATA = "opensearch-cluster-master", "opensearch-cluster-data"
CURATOR = "opensearch-logging-curator-opensearch-curator"
ES_CURATOR = "elasticsearch-logging-curator-elasticsearch-curator"
DASHBOARD = "opensearch-dashboard-opensearch-dashboards"
NAMESPACE = ("Namespace", "", NS)
TOLERATE_ALL = [{"operator": "Exists"}]
ZONE = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}
SPOT = {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 50, "preference": {"matchExpressions": [{"key": "spot", "operator": "NotIn", "values": ["true"]}]}}]}
ANTI_AFFINITY = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
    "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [
        {"key": "app.kubernetes.io/instance", "operator": "In", "values": ["opensearch-master"]},
        {"key": "app.kubernetes.io/name", "operator": "In", "values": ["opensearch"]}]}}}]}
AUTH_ENV = [
    {"name": "CURATOR_USERNAME", "valueFrom": {"secretKeyRef": {"name": "opensearch-credentials", "key": "username"}}},
    {"name": "CURATOR_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "opensearch-credentials", "key": "password"}}},
    {"name": "HTTP_AUTH", "value": "$(CURATOR_USERNAME):$(CURATOR_PASSWORD)"}]
LOGGING = {"logging": {"enabled": True}}


def inventory(name: str) -> set[tuple[str, str, str]]:
    """Upstream's objects (tests/parity/upstream/<name>.json)."""
    objects = json.loads((REPO / "tests" / "parity" / "upstream" / f"{name}.json").read_text())["objects"]
    return {(o["kind"], o["namespace"] or "", o["name"]) for o in objects}


def opensearch(**changes: Any) -> dict[str, Any]:
    return {**LOGGING, "common": {"opensearch": {"enabled": True, **changes}}}


# name → (spec changes, extra variables)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": (LOGGING, {"nodeNum": 1}),
    "nodes3": (LOGGING, {"nodeNum": 3}),
    "nodes5": (LOGGING, {"nodeNum": 5}),
    "explicit": (opensearch(master={"replicas": 3,
                                    "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "4Gi"}}},
                            data={"replicas": 4, "volumeSize": "50Gi"}), {"nodeNum": 1}),
    "external": (opensearch(externalOpensearchHost="search.example.com", externalOpensearchPort=9201,
                            dashboard={"enabled": True}), {"nodeNum": 1}),
    "external_http": (opensearch(externalOpensearchHost="search.example.com", externalOpensearchProtocol="http",
                                 basicAuth={"enabled": False}), {"nodeNum": 1}),
    "es": ({**LOGGING, "common": {"es": {"enabled": True, "elkPrefix": "elk", "logMaxAge": 3, "eventMaxAge": 9,
                                         "basicAuth": {"enabled": True, "username": "elastic", "password": "s3cr:t"},
                                         "externalElasticsearchHost": "es.example.com",
                                         "externalElasticsearchPort": 9202}}}, {"nodeNum": 1}),
    "es_internal": ({**LOGGING, "common": {"es": {"enabled": True}}}, {"nodeNum": 1}),
    "dashboard": (opensearch(dashboard={"enabled": True}, logMaxAge=5, auditingMaxAge=30, opensearchPrefix="ks"),
                  {"nodeNum": 1}),
    "no_auth": (opensearch(basicAuth={"enabled": True, "username": "admin", "password": ""}), {"nodeNum": 1}),
    "registry": ({**opensearch(dashboard={"enabled": True}), "local_registry": "registry.local:5000",
                  "namespace_override": "mirror"}, {"nodeNum": 1}),
    "es_registry": ({**LOGGING, "common": {"es": {"enabled": True}}, "local_registry": "registry.local:5000"},
                    {"nodeNum": 1}),
    "live": ({**opensearch(master={"volumeSize": "5Gi"}, data={"volumeSize": "30Gi"}),
              "persistence": {"storageClass": "fast"}},
             {"nodeNum": 1, "ks_opensearch_live_claims": {"master": {"storage": "10Gi", "storageClassName": "old"}}}),
    "global_scheduling": ({**opensearch(dashboard={"enabled": True}), "nodeSelector": {"global": "yes"},
                           "tolerations": TOLERATE_ALL, "affinity": {"nodeAffinity": ZONE}}, {"nodeNum": 1}),
    "module_scheduling": ({**opensearch(nodeSelector={"logs": "yes"},
                                        tolerations=[{"key": "logs", "operator": "Exists"}], nodeAffinity=SPOT),
                           "nodeSelector": {"global": "yes"}, "tolerations": TOLERATE_ALL,
                           "affinity": {"nodeAffinity": ZONE}}, {"nodeNum": 1}),
    "foreign_namespace": (LOGGING, {"nodeNum": 1, "ks_opensearch_namespace_owner": "fluentbit"}),
    "own_namespace": (LOGGING, {"nodeNum": 1, "ks_opensearch_namespace_owner": "opensearch"}),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), **extra} for name, (changes, extra) in SCENARIOS.items()}
    return render_scenarios("opensearch", "(ks_opensearch_objects + ks_opensearch_secrets)", scenarios,
                            tmp_path_factory.mktemp("opensearch"))


def env(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod(objects, kind, name)["containers"][0]["env"]}


def curator_pod(objects: Objects, name: str = CURATOR) -> dict[str, Any]:
    return find(objects, "CronJob", name)["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def curator_files(objects: Objects, name: str = CURATOR) -> tuple[dict[str, Any], dict[str, Any]]:
    data = find(objects, "ConfigMap", f"{name}-config")["data"]
    return yaml.safe_load(data["config.yml"])["client"], yaml.safe_load(data["action_file.yml"])["actions"]


def claim(objects: Objects, name: str) -> dict[str, Any]:
    return find(objects, "StatefulSet", name)["spec"]["volumeClaimTemplates"][0]["spec"]


def secret(objects: Objects, name: str) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in find(objects, "Secret", name)["data"].items()}


def test_default_is_upstreams_internal_cluster(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    assert keys(objects) == inventory("opensearch") | {NAMESPACE}
    assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} == {NS}
    for name, heap, memory, size in ((MASTER, "512M", "512Mi", "4Gi"), (DATA, "1536M", "1536Mi", "20Gi")):
        sts = find(objects, "StatefulSet", name)
        assert sts["spec"]["replicas"] == 1
        assert sts["spec"]["serviceName"] == f"{name}-headless"
        assert claim(objects, name) == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
        spec = pod(objects, "StatefulSet", name)
        container = spec["containers"][0]
        assert container["image"] == "opensearchproject/opensearch:2.6.0"
        assert container["resources"] == {"requests": {"cpu": "1000m", "memory": memory}}
        assert container["ports"] == [{"name": "http", "containerPort": 9200},
                                      {"name": "transport", "containerPort": 9300}]
        assert container["readinessProbe"]["tcpSocket"] == {"port": 9200}
        assert env(objects, "StatefulSet", name)["OPENSEARCH_JAVA_OPTS"] == f"-Xmx{heap} -Xms{heap}"
        assert env(objects, "StatefulSet", name)["discovery.seed_hosts"] == f"{MASTER}-headless"
        init = spec["initContainers"][0]
        assert (init["image"], init["args"]) == ("busybox:1.31.1", ["chown -R 1000:1000 /usr/share/opensearch/data"])
        assert "nodeSelector" not in spec and "tolerations" not in spec
        config = find(objects, "ConfigMap", f"{name}-config")["data"]["opensearch.yml"]
        assert yaml.safe_load(config)["cluster.name"] == "opensearch-cluster"
        headless = find(objects, "Service", f"{name}-headless")["spec"]
        assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert pod(objects, "StatefulSet", MASTER)["affinity"] == {"podAntiAffinity": ANTI_AFFINITY}
    assert env(objects, "StatefulSet", MASTER)["node.roles"] == "master,"
    assert env(objects, "StatefulSet", MASTER)["cluster.initial_master_nodes"] == f"{MASTER}-0,"
    assert env(objects, "StatefulSet", DATA)["node.roles"] == "ingest,data,remote_cluster_client,"
    assert "cluster.initial_master_nodes" not in env(objects, "StatefulSet", DATA)
    assert find(objects, "Service", DATA)["spec"]["selector"] == {
        "app.kubernetes.io/name": "opensearch", "app.kubernetes.io/instance": "opensearch-data"}


def test_curator_reads_the_password_from_the_secret(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    cron = find(objects, "CronJob", CURATOR)
    assert cron["spec"]["schedule"] == "0 1 * * *"
    container = curator_pod(objects)["containers"][0]
    assert container["image"] == "kubesphere/opensearch-curator:v0.0.5"
    assert container["args"] == ["--config", "/etc/opensearch-curator/config.yml",
                                 "/etc/opensearch-curator/action_file.yml"]
    assert container["env"] == AUTH_ENV
    client, actions = curator_files(objects)
    assert client == {"hosts": ["opensearch-cluster-data.kubesphere-logging-system.svc"], "port": 9200,
                      "use_ssl": True, "ssl_no_validate": True, "http_auth": "${HTTP_AUTH}"}
    assert "admin" not in json.dumps(find(objects, "ConfigMap", f"{CURATOR}-config"))
    assert [(a["filters"][0]["value"], a["filters"][1]["unit_count"]) for a in actions.values()] == [
        ("ks-whizard-logging", 7), ("ks-whizard-events", 7), ("ks-whizard-auditing", 7), ("whizard", 7)]
    credentials = find(objects, "Secret", "opensearch-credentials")
    assert credentials["type"] == "kubernetes.io/basic-auth"
    assert secret(objects, "opensearch-credentials") == {"username": "admin", "password": "admin"}


def test_max_ages_and_prefix(rendered: dict[str, Objects]) -> None:
    _, actions = curator_files(rendered["dashboard"])
    assert [(a["filters"][0]["value"], a["filters"][1]["unit_count"]) for a in actions.values()] == [
        ("ks-ks-logging", 5), ("ks-ks-events", 5), ("ks-ks-auditing", 30), ("ks", 5)]


@pytest.mark.parametrize(("scenario", "master", "data"), [("nodes3", 1, 2), ("nodes5", 3, 3), ("explicit", 3, 4)])
def test_replicas(rendered: dict[str, Objects], scenario: str, master: int, data: int) -> None:
    objects = rendered[scenario]
    assert find(objects, "StatefulSet", MASTER)["spec"]["replicas"] == master
    assert find(objects, "StatefulSet", DATA)["spec"]["replicas"] == data
    assert env(objects, "StatefulSet", MASTER)["cluster.initial_master_nodes"] == "".join(
        f"{MASTER}-{i}," for i in range(master))


def test_explicit_resources_and_volume(rendered: dict[str, Objects]) -> None:
    objects = rendered["explicit"]
    assert pod(objects, "StatefulSet", MASTER)["containers"][0]["resources"] == {
        "requests": {"cpu": "2", "memory": "512Mi"}, "limits": {"memory": "4Gi"}}
    assert claim(objects, DATA)["resources"]["requests"]["storage"] == "50Gi"


def test_default_replica_rules() -> None:
    replicas = filter_plugins("opensearch", "opensearch").ks_opensearch_replicas
    assert [replicas("master", n) for n in (1, 4, 5, None)] == [1, 1, 3, 3]
    assert [replicas("data", n) for n in (1, 2, 4, 5, None, "3")] == [1, 2, 2, 3, 3, 2]


def test_live_claims() -> None:
    live_claims = filter_plugins("opensearch", "opensearch").ks_opensearch_live_claims
    sts = {"kind": "StatefulSet", "spec": {"volumeClaimTemplates": [
        {"spec": {"resources": {"requests": {"storage": "6Gi"}}, "storageClassName": "old"}}]}}
    pvc = {"kind": "PersistentVolumeClaim", "spec": {"resources": {"requests": {"storage": "25Gi"}}}}
    results = [{"item": {"group": "master"}, "resources": [sts]}, {"item": {"group": "master"}, "resources": [pvc]},
               {"item": {"group": "data"}, "resources": []}, {"item": {"group": "data"}, "resources": [pvc]}]
    assert live_claims(results) == {"master": {"storage": "6Gi", "storageClassName": "old"},
                                    "data": {"storage": "25Gi"}}
    assert live_claims([{"skipped": True}]) == {}


def test_existing_claim_is_kept(rendered: dict[str, Objects]) -> None:
    objects = rendered["live"]
    assert claim(objects, MASTER) == {"accessModes": ["ReadWriteOnce"], "storageClassName": "old",
                                      "resources": {"requests": {"storage": "10Gi"}}}
    assert claim(objects, DATA) == {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                                    "resources": {"requests": {"storage": "30Gi"}}}


def test_external_opensearch_gets_only_the_curator(rendered: dict[str, Objects]) -> None:
    objects = rendered["external"]
    assert keys(objects) == {NAMESPACE, ("ConfigMap", NS, f"{CURATOR}-config"), ("CronJob", NS, CURATOR),
                             ("Secret", NS, "opensearch-credentials")}
    client, _ = curator_files(objects)
    assert (client["hosts"], client["port"], client["use_ssl"]) == (["search.example.com"], 9201, True)
    http = rendered["external_http"]
    client, _ = curator_files(http)
    assert "use_ssl" not in client and "http_auth" not in client
    assert curator_pod(http)["containers"][0]["env"] == []
    assert not [o for o in http if o["kind"] == "Secret"]


def test_elasticsearch_path(rendered: dict[str, Objects]) -> None:
    objects = rendered["es"]
    assert keys(objects) == inventory("opensearch-es") | {NAMESPACE}
    container = curator_pod(objects, ES_CURATOR)["containers"][0]
    assert container["image"] == "kubesphere/elasticsearch-curator:v5.7.6"
    assert container["args"] == ["--config", "/etc/es-curator/config.yml", "/etc/es-curator/action_file.yml"]
    assert container["env"] == [{**e, "valueFrom": {"secretKeyRef": {**e["valueFrom"]["secretKeyRef"],
                                                                     "name": "elasticsearch-credentials"}}}
                                if "valueFrom" in e else e for e in AUTH_ENV]
    client, actions = curator_files(objects, ES_CURATOR)
    assert client == {"hosts": ["es.example.com"], "port": 9202, "http_auth": "${HTTP_AUTH}"}
    assert [(a["filters"][0]["value"], a["filters"][1]["unit_count"]) for a in actions.values()] == [
        ("ks-elk-log", 3), ("ks-elk-events", 9), ("ks-elk-auditing", 3), ("elk", 3)]
    assert secret(objects, "elasticsearch-credentials") == {"username": "elastic", "password": "s3cr:t"}
    internal = rendered["es_internal"]
    client, _ = curator_files(internal, ES_CURATOR)
    assert client == {"hosts": ["elasticsearch-logging-data.kubesphere-logging-system.svc"], "port": 9200}
    assert keys(internal) == {NAMESPACE, ("ConfigMap", NS, f"{ES_CURATOR}-config"), ("CronJob", NS, ES_CURATOR)}


def test_dashboard(rendered: dict[str, Objects]) -> None:
    objects = rendered["dashboard"]
    assert keys(objects) == inventory("opensearch") | inventory("opensearch-dashboard") | {NAMESPACE}
    spec = pod(objects, "Deployment", DASHBOARD)
    container = spec["containers"][0]
    assert container["image"] == "opensearchproject/opensearch-dashboards:2.6.0"
    assert env(objects, "Deployment", DASHBOARD)["OPENSEARCH_HOSTS"] == "https://opensearch-cluster-master:9200"
    assert container["resources"] == {"limits": {"cpu": "100m", "memory": "512M"},
                                      "requests": {"cpu": "100m", "memory": "512M"}}
    assert spec["serviceAccountName"] == f"{DASHBOARD}-dashboards"
    assert find(objects, "Service", DASHBOARD)["spec"]["ports"][0]["port"] == 5601
    # The dashboard talks to the internal masters: not rendered for an external OpenSearch.
    assert ("Deployment", NS, DASHBOARD) not in keys(rendered["external"])


def test_incomplete_basic_auth_gives_no_secret(rendered: dict[str, Objects]) -> None:
    objects = rendered["no_auth"]
    assert not [o for o in objects if o["kind"] == "Secret"]
    assert curator_pod(objects)["containers"][0]["env"] == []
    assert "http_auth" not in curator_files(objects)[0]


def test_registry_override(rendered: dict[str, Objects]) -> None:
    objects = rendered["registry"]
    images = {c["image"] for o in objects if o["kind"] in ("StatefulSet", "Deployment")
              for c in pod(objects, o["kind"], o["metadata"]["name"])["containers"]
              + pod(objects, o["kind"], o["metadata"]["name"]).get("initContainers", [])}
    images |= {curator_pod(objects)["containers"][0]["image"]}
    assert images == {"registry.local:5000/mirror/opensearch:2.6.0", "registry.local:5000/mirror/busybox:1.31.1",
                      "registry.local:5000/mirror/opensearch-dashboards:2.6.0",
                      "registry.local:5000/mirror/opensearch-curator:v0.0.5"}
    es = curator_pod(rendered["es_registry"], ES_CURATOR)["containers"][0]["image"]
    assert es == "registry.local:5000/kubesphere/elasticsearch-curator:v5.7.6"


def test_global_scheduling(rendered: dict[str, Objects]) -> None:
    objects = rendered["global_scheduling"]
    for spec in (pod(objects, "StatefulSet", MASTER), pod(objects, "Deployment", DASHBOARD), curator_pod(objects)):
        assert spec["nodeSelector"] == {"global": "yes"} and spec["tolerations"] == TOLERATE_ALL
    assert pod(objects, "StatefulSet", MASTER)["affinity"] == {"podAntiAffinity": ANTI_AFFINITY, "nodeAffinity": ZONE}
    assert pod(objects, "Deployment", DASHBOARD)["affinity"] == {"nodeAffinity": ZONE}


def test_module_scheduling_wins(rendered: dict[str, Objects]) -> None:
    objects = rendered["module_scheduling"]
    for spec in (pod(objects, "StatefulSet", DATA), curator_pod(objects)):
        assert spec["nodeSelector"] == {"logs": "yes"}
        assert spec["tolerations"] == [{"key": "logs", "operator": "Exists"}]
        assert spec["affinity"]["nodeAffinity"] == SPOT


def test_namespace_of_another_module_is_left_alone(rendered: dict[str, Objects]) -> None:
    assert NAMESPACE not in keys(rendered["foreign_namespace"])
    namespace = find(rendered["own_namespace"], "Namespace", NS)
    assert namespace["metadata"]["labels"] == {"kubesphere.io/workspace": "system-workspace",
                                               "kubesphere.io/namespace": NS}
