"""The events role's manifests, rendered by Ansible for spec variants and container runtimes (no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from installer_state import upstream_objects
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
NS = "kubesphere-logging-system"
OPERATOR = "ks-events-operator"
ON = {"events": {"enabled": True}}
ZONE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
CONTAINERD = "containerd://1.7.2"
# name → (spec changes, containerRuntimeVersion of the first node)
SCENARIOS: dict[str, tuple[dict[str, Any], str]] = {
    "default": (ON, CONTAINERD),
    "docker": (ON, "docker://20.10.8"),
    "no_node": (ON, ""),
    "ruler_off": ({"events": {"enabled": True, "ruler": {"enabled": False}}}, CONTAINERD),
    "resources": ({"events": {"enabled": True,
                              "operator": {"resources": {"limits": {"memory": "300Mi"}}},
                              "exporter": {"resources": {"requests": {"cpu": "30m"}}},
                              "ruler": {"enabled": True, "replicas": 3,
                                        "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "64Mi"}}}}},
                  CONTAINERD),
    "own_scheduling": ({"events": {"enabled": True, "nodeSelector": {"events": "yes"},
                                   "tolerations": [{"operator": "Exists"}], "affinity": ZONE},
                        "nodeSelector": {"global": "yes"}, "tolerations": [{"key": "g", "operator": "Exists"}]},
                       CONTAINERD),
    "global_scheduling": ({**ON, "nodeSelector": {"global": "yes"}, "tolerations": [{"operator": "Exists"}],
                           "affinity": ZONE}, CONTAINERD),
    "registry": ({**ON, "local_registry": "registry.local:5000"}, CONTAINERD),
    "external": ({**ON, "common": {"opensearch": {"externalOpensearchHost": "os.example",
                                                  "externalOpensearchPort": 9201, "opensearchPrefix": "prod",
                                                  "basicAuth": {"enabled": False}}}}, CONTAINERD),
    "es": ({**ON, "common": {"es": {"enabled": True, "elkPrefix": "team"}, "opensearch": {"enabled": False}}},
           CONTAINERD),
    "no_store": ({**ON, "common": {"opensearch": {"enabled": False}}}, CONTAINERD),
}
PIPELINE = {("Input", NS, "tail-events"), ("Filter", NS, "filter-events"), ("Output", NS, "opensearch-events")}
RESOURCES = {"operator": {"limits": {"cpu": "200m", "memory": "200Mi"}, "requests": {"cpu": "20m", "memory": "20Mi"}},
             "exporter": {"limits": {"cpu": "200m", "memory": "500Mi"}, "requests": {"cpu": "20m", "memory": "50Mi"}},
             "ruler": {"limits": {"cpu": "500m", "memory": "500Mi"}, "requests": {"cpu": "50m", "memory": "50Mi"}}}
HOST_TIME = {"volumes": [{"hostPath": {"path": "/etc/localtime"}, "name": "host-time"}],
             "volumeMounts": [{"mountPath": "/etc/localtime", "name": "host-time", "readOnly": True}]}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), "ks_node_runtime_version": runtime,
                        "ks_events_webhook_cert": {"ca_bundle": "Q0E="}}
                 for name, (changes, runtime) in SCENARIOS.items()}
    return render_scenarios("events", "ks_events_objects", scenarios, tmp_path_factory.mktemp("events"))


def spec_of(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    return find(objects, kind, name)["spec"]


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)), f"{name}: an object is rendered twice"
    # Upstream's 17 objects, the certificate Secret made by ks_webhook_cert at run time rather than rendered.
    expected = upstream_objects("events") - {("Secret", NS, "ks-events-admission")}
    for name in ("default", "docker", "no_node", "resources", "own_scheduling", "global_scheduling", "registry",
                 "external"):
        assert keys(rendered[name]) == expected, name
    assert keys(rendered["ruler_off"]) == expected - {("Ruler", NS, "ks-events-ruler")}
    assert keys(rendered["es"]) == expected - {("Output", NS, "opensearch-events")} | {("Output", NS, "es-events")}
    # As upstream, no fluent-bit pipeline without a log store.
    assert keys(rendered["no_store"]) == expected - PIPELINE
    assert not any(o["kind"] == "Namespace" for o in rendered["default"]), "the namespace is fluentbit's"


def test_crds(rendered: dict[str, Objects]) -> None:
    crds = {o["spec"]["names"]["kind"]: o for o in rendered["default"] if o["kind"] == "CustomResourceDefinition"}
    assert {k: (c["metadata"]["name"], c["spec"]["names"]["shortNames"]) for k, c in crds.items()} == {
        "Exporter": ("exporters.events.kubesphere.io", ["ex"]), "Ruler": ("rulers.events.kubesphere.io", ["erl"]),
        "Rule": ("rules.events.kubesphere.io", ["er"])}
    for crd in crds.values():
        (version,) = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
        assert "subresources" not in version and crd["spec"]["scope"] == "Namespaced"
        assert version["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] is True


def test_operator_as_the_chart_rendered_it(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    deployment = find(objects, "Deployment", OPERATOR)
    labels = {"helm.sh/chart": "kube-events-0.4.0", "app.kubernetes.io/version": "0.6.0",
              "app.kubernetes.io/name": "kube-events", "app.kubernetes.io/instance": "ks-events"}
    assert deployment["metadata"]["labels"] == labels
    assert deployment["spec"]["replicas"] == 1
    pod_labels = {"app": OPERATOR, **labels}
    assert deployment["spec"]["selector"] == {"matchLabels": pod_labels}
    # The pods keep the chart's Helm label (a switch from v3.4.1 keeps them), which the selector does not hold.
    assert deployment["spec"]["template"]["metadata"]["labels"] == {**pod_labels,
                                                                   "app.kubernetes.io/managed-by": "Helm"}
    spec = pod(objects, "Deployment", OPERATOR)
    assert spec["serviceAccountName"] == OPERATOR and spec["terminationGracePeriodSeconds"] == 10
    (container,) = spec["containers"]
    assert container["name"] == "events-operator"
    assert container["image"] == "kubesphere/kube-events-operator:v0.6.0"
    assert container["args"] == ["--config-reloader-image=jimmidyson/configmap-reload:v0.7.1"]
    assert container["env"] == [{"name": "POD_NAMESPACE",
                                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
    assert container["ports"] == [{"containerPort": 9443, "name": "webhook-server", "protocol": "TCP"}]
    assert container["resources"] == RESOURCES["operator"]
    assert not {"livenessProbe", "readinessProbe"} & set(container), "upstream's operator has no probes"
    assert container["volumeMounts"][0] == {"mountPath": "/tmp/k8s-webhook-server/serving-certs", "name": "cert",
                                            "readOnly": True}
    assert spec["volumes"][0] == {"name": "cert", "secret": {"defaultMode": 420, "secretName": "ks-events-admission"}}
    assert container["volumeMounts"][1:] == HOST_TIME["volumeMounts"]
    assert not {"nodeSelector", "tolerations", "affinity"} & set(spec), "upstream's defaults are empty"
    service = spec_of(objects, "Service", "ks-events-admission")
    assert service == {"ports": [{"port": 443, "targetPort": 9443}], "selector": pod_labels}
    assert find(objects, "ServiceAccount", OPERATOR)["metadata"]["namespace"] == NS
    rules = find(objects, "ClusterRole", OPERATOR)["rules"]
    assert len(rules) == 19
    assert {"apiGroups": ["events.kubesphere.io"], "resources": ["rulers/finalizers"], "verbs": ["update"]} in rules
    binding = find(objects, "ClusterRoleBinding", OPERATOR)
    assert binding["roleRef"]["name"] == OPERATOR
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NS}]


def test_webhooks_check_rules_with_the_generated_ca(rendered: dict[str, Objects]) -> None:
    for kind, name, hook, path in [
            ("MutatingWebhookConfiguration", "ks-events-admission-mutate", "mrule.kb.io",
             "/mutate-events-kubesphere-io-v1alpha1-rule"),
            ("ValidatingWebhookConfiguration", "ks-events-admission-validate", "vrule.kb.io",
             "/validate-events-kubesphere-io-v1alpha1-rule")]:
        (webhook,) = find(rendered["default"], kind, name)["webhooks"]
        assert webhook["name"] == hook and webhook["failurePolicy"] == "Fail" and webhook["sideEffects"] == "None"
        assert webhook["clientConfig"] == {"caBundle": "Q0E=", "service": {
            "name": "ks-events-admission", "namespace": NS, "path": path}}
        assert webhook["rules"] == [{"apiGroups": ["events.kubesphere.io"], "apiVersions": ["v1alpha1"],
                                     "operations": ["CREATE", "UPDATE"], "resources": ["rules"]}]


def test_exporter_ruler_and_default_rules(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    exporter = spec_of(objects, "Exporter", "ks-events-exporter")
    assert exporter == {"image": "kubesphere/kube-events-exporter:v0.6.0", "imagePullPolicy": "IfNotPresent",
                        "resources": RESOURCES["exporter"], **HOST_TIME,
                        "sinks": {"stdout": {}, "webhooks": [{"service": {
                            "namespace": NS, "name": "ks-events-ruler", "port": 8443, "path": "/events"}}]}}
    ruler = spec_of(objects, "Ruler", "ks-events-ruler")
    assert ruler == {"image": "kubesphere/kube-events-ruler:v0.6.0", "imagePullPolicy": "IfNotPresent",
                     "replicas": 2, "resources": RESOURCES["ruler"], **HOST_TIME,
                     "ruleNamespaceSelector": {}, "ruleSelector": {},
                     "sinks": {"alertmanagers": [{"namespace": "kubesphere-monitoring-system",
                                                  "name": "alertmanager-operated"}]}}
    # Without the ruler the exporter only prints.
    assert spec_of(rendered["ruler_off"], "Exporter", "ks-events-exporter")["sinks"] == {"stdout": {}}
    rule = find(objects, "Rule", "ks-events-cluster-rules-default")
    assert rule["metadata"]["labels"]["kubesphere.io/rule-scope"] == "cluster"
    # Helm's hook annotations are left out; made once instead (created when absent, then left to its users).
    assert rule["metadata"]["annotations"] == {"installer.kubesphere.io/ssa": "IfNotPresent"}
    rules = rule["spec"]["rules"]
    # Upstream's 97 rules, LoadBalancerDeleting twice (identical) among them.
    assert len(rules) == 97 and len({r["name"] for r in rules}) == 96
    assert {r["type"] for r in rules} == {"notification", "alert"} and all(r["enable"] is True for r in rules)
    failed = next(r for r in rules if r["name"] == "ContainerFailed")
    assert failed["condition"] == ('type="Warning" and involvedObject.kind="Pod" and reason="Failed" and '
                                   'involvedObject.fieldPath != ""\n')
    assert failed["labels"] == {"severity": "warning"} and failed["annotations"]["summaryCn"] == "容器失败"


def test_resources_and_replicas_from_spec(rendered: dict[str, Objects]) -> None:
    objects = rendered["resources"]
    operator = pod(objects, "Deployment", OPERATOR)["containers"][0]["resources"]
    assert operator == {"limits": {"cpu": "200m", "memory": "300Mi"}, "requests": {"cpu": "20m", "memory": "20Mi"}}
    exporter = spec_of(objects, "Exporter", "ks-events-exporter")["resources"]
    assert exporter == {"limits": {"cpu": "200m", "memory": "500Mi"}, "requests": {"cpu": "30m", "memory": "50Mi"}}
    ruler = spec_of(objects, "Ruler", "ks-events-ruler")
    assert ruler["replicas"] == 3
    assert ruler["resources"] == {"limits": {"cpu": "1", "memory": "500Mi"},
                                  "requests": {"cpu": "50m", "memory": "64Mi"}}


def _scheduling(objects: Objects) -> list[dict[str, Any]]:
    fields = ("nodeSelector", "tolerations", "affinity")
    return [{f: s[f] for f in fields if f in s} for s in (
        pod(objects, "Deployment", OPERATOR), spec_of(objects, "Exporter", "ks-events-exporter"),
        spec_of(objects, "Ruler", "ks-events-ruler"))]


def test_scheduling_from_events_else_global(rendered: dict[str, Objects]) -> None:
    own = {"nodeSelector": {"events": "yes"}, "tolerations": [{"operator": "Exists"}], "affinity": ZONE}
    assert _scheduling(rendered["own_scheduling"]) == [own] * 3
    glob = {"nodeSelector": {"global": "yes"}, "tolerations": [{"operator": "Exists"}], "affinity": ZONE}
    assert _scheduling(rendered["global_scheduling"]) == [glob] * 3
    assert _scheduling(rendered["default"]) == [{}] * 3


def test_images_through_the_catalogue(rendered: dict[str, Objects]) -> None:
    objects = rendered["registry"]
    container = pod(objects, "Deployment", OPERATOR)["containers"][0]
    assert container["image"] == "registry.local:5000/kubesphere/kube-events-operator:v0.6.0"
    assert container["args"] == ["--config-reloader-image=registry.local:5000/jimmidyson/configmap-reload:v0.7.1"]
    assert spec_of(objects, "Exporter", "ks-events-exporter")["image"] == (
        "registry.local:5000/kubesphere/kube-events-exporter:v0.6.0")
    assert spec_of(objects, "Ruler", "ks-events-ruler")["image"] == (
        "registry.local:5000/kubesphere/kube-events-ruler:v0.6.0")


@pytest.mark.parametrize(("scenario", "parser", "key"), [
    ("default", "cri", "message"), ("no_node", "cri", "message"), ("docker", "docker", "log")])
def test_pipeline_follows_the_container_runtime(rendered: dict[str, Objects], scenario: str, parser: str,
                                                key: str) -> None:
    objects = rendered[scenario]
    selected = {"logging.kubesphere.io/enabled": "true", "logging.kubesphere.io/component": "events"}
    tail = find(objects, "Input", "tail-events")
    assert tail["metadata"]["labels"] == selected
    assert tail["spec"] == {"tail": {
        "tag": "kube_events", "path": "/var/log/containers/*_kubesphere-logging-system_events-exporter*.log",
        "parser": parser, "refreshIntervalSeconds": 10, "memBufLimit": "5MB", "skipLongLines": True,
        "db": "/fluent-bit/tail/pos-events.db", "dbSync": "Normal"}}
    log_filter = find(objects, "Filter", "filter-events")
    assert log_filter["metadata"]["labels"] == selected
    assert log_filter["spec"] == {"match": "kube_events", "filters": [{"parser": {"keyName": key, "parser": "json"}}]}
    assert find(objects, "Output", "opensearch-events")["metadata"]["labels"] == selected


def test_output_to_the_log_store(rendered: dict[str, Objects]) -> None:
    internal = spec_of(rendered["default"], "Output", "opensearch-events")
    assert internal["match"] == "kube_events"
    section = internal["opensearch"]
    assert (section["host"], section["port"], section["logstashPrefix"]) == (
        "opensearch-cluster-data.kubesphere-logging-system.svc", 9200, "ks-whizard-events")
    assert section["generateID"] is True and section["suppressTypeName"] is True
    assert section["tls"] == {"verify": False}
    assert section["httpPassword"] == {"valueFrom": {"secretKeyRef": {"name": "opensearch-credentials",
                                                                      "key": "password"}}}
    external = spec_of(rendered["external"], "Output", "opensearch-events")["opensearch"]
    assert (external["host"], external["port"], external["logstashPrefix"]) == ("os.example", 9201, "ks-prod-events")
    assert "httpUser" not in external
    es = spec_of(rendered["es"], "Output", "es-events")
    assert es["match"] == "kube_events" and "opensearch" not in es
    assert (es["es"]["logstashPrefix"], es["es"]["generateID"]) == ("ks-team-events", True)
