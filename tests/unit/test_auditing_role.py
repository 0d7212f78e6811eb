"""The auditing role's manifests, rendered by Ansible for spec variants and container runtimes (no cluster)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from installer_state import upstream_objects
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO.parent / ".mirror" / "kubesphere+ks-installer" / "repo"
NS = "kubesphere-logging-system"
OPERATOR = "kube-auditing-operator"
WEBHOOK = "kube-auditing-webhook"
ON = {"auditing": {"enabled": True}}
ZONE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
PIPELINE = {("Input", NS, "tail-auditing"), ("Filter", NS, "filter-auditing")}
# name → (spec changes, containerRuntimeVersion of the first node)
SCENARIOS: dict[str, tuple[dict[str, Any], str]] = {
    "default": (ON, "containerd://1.7.2"),
    "docker": (ON, "docker://20.10.8"),
    "no_node": (ON, ""),
    "no_store": ({**ON, "common": {"opensearch": {"enabled": False}}}, "containerd://1.7.2"),
    "external_opensearch": ({**ON, "common": {"opensearch": {
        "externalOpensearchHost": "search.example.com", "externalOpensearchPort": 9201, "opensearchPrefix": "acme",
        "basicAuth": {"enabled": False}}}}, "containerd://1.7.2"),
    "es": ({**ON, "common": {"opensearch": {"enabled": False}, "es": {
        "enabled": True, "externalElasticsearchHost": "es.example.com", "externalElasticsearchProtocol": "https",
        "elkPrefix": "logs"}}}, "containerd://1.7.2"),
    "resources": ({"auditing": {"enabled": True,
                                "operator": {"resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "50m"}}},
                                "webhook": {"resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "30m"}}}}},
                  "containerd://1.7.2"),
    "global_scheduling": ({**ON, "nodeSelector": {"pool": "infra"}, "tolerations": [{"operator": "Exists"}],
                           "affinity": ZONE}, "containerd://1.7.2"),
    "registry": ({**ON, "local_registry": "registry.local:5000", "namespace_override": "mirror"},
                 "containerd://1.7.2"),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), "ks_node_runtime_version": runtime}
                 for name, (changes, runtime) in SCENARIOS.items()}
    return render_scenarios("auditing", "ks_auditing_objects", scenarios, tmp_path_factory.mktemp("auditing"))


def webhook(objects: Objects) -> dict[str, Any]:
    return find(objects, "Webhook", WEBHOOK)["spec"]


def output(objects: Objects) -> dict[str, Any]:
    (out,) = [o for o in objects if o["kind"] == "Output"]
    return out


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)), f"{name}: an object is rendered twice"
        upstream = upstream_objects("auditing")
        if name == "no_store":  # upstream applied the pipeline only for an enabled OpenSearch or Elasticsearch
            assert keys(objects) == {k for k in upstream if k[0] not in ("Input", "Filter", "Output")}
        elif name == "es":
            expected = upstream - {("Output", NS, "opensearch-auditing")} | {("Output", NS, "es-auditing")}
            assert keys(objects) == expected, name
        else:
            assert keys(objects) == upstream_objects("auditing"), name
    assert all(o["kind"] != "Namespace" for o in rendered["default"]), "the namespace is fluentbit's"


def test_crds(rendered: dict[str, Objects]) -> None:
    crds = {o["metadata"]["name"]: o["spec"] for o in rendered["default"] if o["kind"] == "CustomResourceDefinition"}
    assert {name: (spec["scope"], spec["names"]["kind"], spec["names"]["shortNames"]) for name, spec in crds.items()} \
        == {"rules.auditing.kubesphere.io": ("Namespaced", "Rule", ["ar"]),
            "webhooks.auditing.kubesphere.io": ("Cluster", "Webhook", ["awh"])}
    for spec in crds.values():
        (version,) = spec["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
        assert "subresources" not in version
        assert version["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] is True


def test_operator_as_the_chart_rendered_it(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    deployment = find(objects, "Deployment", OPERATOR)
    assert deployment["metadata"]["namespace"] == NS and deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["selector"] == {"matchLabels": {"name": OPERATOR}}
    spec = pod(objects, "Deployment", OPERATOR)
    assert spec["serviceAccountName"] == OPERATOR
    (container,) = spec["containers"]
    assert container["image"] == "kubesphere/kube-auditing-operator:v0.2.0"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == ["kube-auditing-operator"]
    assert [e["name"] for e in container["env"]] == ["WATCH_NAMESPACE", "POD_NAME", "OPERATOR_NAME", "NAMESPACE"]
    assert container["env"][2]["value"] == OPERATOR
    assert container["resources"] == {"limits": {"cpu": "200m", "memory": "200Mi"},
                                      "requests": {"cpu": "20m", "memory": "20Mi"}}
    assert container["volumeMounts"] == [{"mountPath": "/etc/localtime", "name": "host-time", "readOnly": True}]
    assert spec["volumes"] == [{"name": "host-time", "hostPath": {"path": "/etc/localtime", "type": ""}}]
    # Upstream's defaults: no nodeSelector or tolerations, `affinity: {}` (kept, so a switch keeps the pod).
    assert not {"nodeSelector", "tolerations"} & set(spec) and spec["affinity"] == {}
    assert find(objects, "ServiceAccount", OPERATOR)["metadata"]["namespace"] == NS
    rules = find(objects, "ClusterRole", OPERATOR)["rules"]
    assert len(rules) == 5
    assert {"apiGroups": ["auditing.kubesphere.io"], "resources": ["webhooks", "rules"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]} in rules
    binding = find(objects, "ClusterRoleBinding", OPERATOR)
    assert binding["roleRef"] == {"kind": "ClusterRole", "name": OPERATOR, "apiGroup": "rbac.authorization.k8s.io"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NS}]


def test_webhook_with_upstreams_values(rendered: dict[str, Objects]) -> None:
    cr = find(rendered["default"], "Webhook", WEBHOOK)
    assert cr["apiVersion"] == "auditing.kubesphere.io/v1alpha1" and "namespace" not in cr["metadata"]
    assert cr["spec"] == {
        "replicas": 2, "image": "kubesphere/kube-auditing-webhook:v0.2.0", "imagePullPolicy": "IfNotPresent",
        "imagePullSecrets": [], "args": [], "nodeSelector": {}, "affinity": {}, "tolerations": [],
        "resources": {"limits": {"cpu": "200m", "memory": "500Mi"}, "requests": {"cpu": "20m", "memory": "50Mi"}},
        "receivers": [{"name": "alert", "type": "alertmanager", "config": {"service": {
            "namespace": "kubesphere-monitoring-system", "name": "alertmanager-main", "port": 9093}}}],
        "archivingPriority": "DEBUG", "alertingPriority": "WARNING", "auditLevel": "Metadata",
        "k8sAuditingEnabled": False, "useHTTPS": True}


def _upstream_rules() -> dict[str, Any] | None:
    try:
        text = subprocess.run(["git", "-C", str(UPSTREAM), "show",
                               "v3.4.1:roles/ks-auditing/files/kube-auditing/templates/rules.yaml"],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(text) if d}


def test_rules(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    archiving = find(objects, "Rule", "archiving-rule")
    assert archiving["metadata"]["labels"] == {"workspace": "system-workspace", "type": "archiving"}
    assert [r["name"] for r in archiving["spec"]["rules"]] == ["ignore-action", "archiving"]
    alerting = find(objects, "Rule", "alerting-rule")
    assert alerting["metadata"]["labels"] == {"workspace": "system-workspace", "type": "alerting"}
    by_name = {r["name"]: r for r in alerting["spec"]["rules"]}
    assert len(by_name) == 12 and by_name["CreateHostnetworkPod"]["priority"] == "WARNING"
    attach = '${pod} and ${create} and ObjectRef.Subresource in ("exec", "attach")'
    assert by_name["AttachOrExecPod"]["condition"] == attach
    upstream = _upstream_rules()
    if upstream is not None:  # the mirror is there: the content is upstream's, rule for rule
        for name, rule in (("archiving-rule", archiving), ("alerting-rule", alerting)):
            assert rule["spec"] == upstream[name]["spec"], name
            assert rule["metadata"]["labels"] == upstream[name]["metadata"]["labels"], name


@pytest.mark.parametrize(("scenario", "parser", "key"), [("default", "cri", "message"), ("no_node", "cri", "message"),
                                                         ("docker", "docker", "log")])
def test_pipeline_follows_the_runtime(rendered: dict[str, Objects], scenario: str, parser: str, key: str) -> None:
    objects = rendered[scenario]
    labels = {"logging.kubesphere.io/enabled": "true", "logging.kubesphere.io/component": "auditing"}
    tail = find(objects, "Input", "tail-auditing")
    assert tail["metadata"]["labels"] == labels
    assert tail["spec"]["tail"] == {
        "db": "/fluent-bit/tail/pos-auditing.db", "dbSync": "Normal", "memBufLimit": "5MB", "parser": parser,
        "path": "/var/log/containers/kube-auditing-webhook*_kubesphere-logging-system_kube-auditing-webhook*.log",
        "refreshIntervalSeconds": 10, "skipLongLines": True, "tag": "kube_auditing"}
    filt = find(objects, "Filter", "filter-auditing")
    assert filt["metadata"]["labels"] == labels
    assert filt["spec"] == {"match": "kube_auditing", "filters": [
        {"parser": {"keyName": key, "parser": "json"}},
        {"modify": {"conditions": [{"keyDoesNotExist": {"AuditID": ""}}], "rules": [{"add": {"ignore": "true"}}]}},
        {"grep": {"exclude": "ignore true"}}]}
    assert output(objects)["metadata"]["labels"] == labels


def test_outputs(rendered: dict[str, Objects]) -> None:
    internal = output(rendered["default"])
    assert internal["metadata"]["name"] == "opensearch-auditing"
    credentials = {"valueFrom": {"secretKeyRef": {"name": "opensearch-credentials", "key": "username"}}}
    assert internal["spec"]["match"] == "kube_auditing"
    store = internal["spec"]["opensearch"]
    assert (store["host"], store["port"], store["logstashPrefix"]) == (
        "opensearch-cluster-data.kubesphere-logging-system.svc", 9200, "ks-whizard-auditing")
    assert store["httpUser"] == credentials and store["tls"] == {"verify": False} and store["suppressTypeName"]
    external = output(rendered["external_opensearch"])["spec"]["opensearch"]
    assert (external["host"], external["port"], external["logstashPrefix"]) == ("search.example.com", 9201,
                                                                                 "ks-acme-auditing")
    assert "httpUser" not in external
    es = output(rendered["es"])
    assert es["metadata"]["name"] == "es-auditing"
    assert es["spec"]["es"]["host"] == "es.example.com" and es["spec"]["es"]["logstashPrefix"] == "ks-logs-auditing"
    assert es["spec"]["es"]["tls"] == {"verify": False} and es["spec"]["es"]["generateID"] is True


def test_resources_each_from_its_own_field(rendered: dict[str, Objects]) -> None:
    objects = rendered["resources"]
    operator = pod(objects, "Deployment", OPERATOR)["containers"][0]["resources"]
    assert operator == {"limits": {"cpu": "200m", "memory": "1Gi"}, "requests": {"cpu": "50m", "memory": "20Mi"}}
    # Upstream read the webhook's cpu from the memory fields; here the cpu stays its default.
    assert webhook(objects)["resources"] == {"limits": {"cpu": "200m", "memory": "1Gi"},
                                             "requests": {"cpu": "30m", "memory": "50Mi"}}


def test_global_scheduling_and_registry(rendered: dict[str, Objects]) -> None:
    objects = rendered["global_scheduling"]
    spec = pod(objects, "Deployment", OPERATOR)
    assert spec["nodeSelector"] == {"pool": "infra"}
    assert spec["tolerations"] == [{"operator": "Exists"}] and spec["affinity"] == ZONE
    hook = webhook(objects)
    assert (hook["nodeSelector"], hook["tolerations"], hook["affinity"]) == (
        {"pool": "infra"}, [{"operator": "Exists"}], ZONE)
    objects = rendered["registry"]
    image = pod(objects, "Deployment", OPERATOR)["containers"][0]["image"]
    assert image == "registry.local:5000/mirror/kube-auditing-operator:v0.2.0"
    assert webhook(objects)["image"] == "registry.local:5000/mirror/kube-auditing-webhook:v0.2.0"
