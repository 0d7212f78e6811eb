"""The servicemesh role's manifests, rendered by Ansible for spec variants (no cluster)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import upstream_fixture
import yaml
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
NS = "istio-system"
ISTIOD = "istiod-1-14-6"
ON = {"servicemesh": {"enabled": True}}
ZONE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
ISTIO = {"hub": "mirror.local/istio", "tag": "1.14.6-patched",
         "meshConfig": {"accessLogFile": "/dev/stdout", "defaultConfig": {"holdApplicationUntilProxyStarts": True}},
         "components": {"pilot": {"k8s": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                          "nodeSelector": {"mesh": "yes"},
                                          "env": [{"name": "PILOT_TRACE_SAMPLING", "value": "5"}]}}},
         "values": {"global": {"logging": {"level": "default:debug"}},
                    "pilot": {"autoscaleEnabled": False, "replicaCount": 2},
                    "sidecarInjectorWebhook": {"templates": {"sidecar": "spec: {}"}}}}
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": ON,
    "resources": {"servicemesh": {"enabled": True, "jaeger": {"resources": {"limits": {"memory": "1Gi"}}},
                                  "jaeger_operator": {"resources": {"requests": {"cpu": "50m"}}}}},
    "scheduling": {"servicemesh": {"enabled": True, "nodeSelector": {"pool": "mesh"},
                                   "tolerations": [{"operator": "Exists"}]},
                   "nodeSelector": {"pool": "infra"}, "affinity": ZONE},
    "registry": {**ON, "local_registry": "registry.local:5000"},
    "istio": {"servicemesh": {"enabled": True, "istio": ISTIO}},
    "external_es": {**ON, "common": {"es": {
        "enabled": True, "elkPrefix": "prod", "externalElasticsearchHost": "es.local",
        "externalElasticsearchPort": 9200,
        "basicAuth": {"enabled": True, "username": "elastic", "password": "s3cret"}}}},
    "external_os_no_auth": {**ON, "common": {"opensearch": {"externalOpensearchHost": "os.local",
                                                            "externalOpensearchPort": 9201,
                                                            "basicAuth": {"enabled": False}}}},
}
UPSTREAM_IMAGES = {"istio/pilot:1.14.6", "jaegertracing/jaeger-agent:1.29", "jaegertracing/jaeger-collector:1.29",
                   "jaegertracing/jaeger-es-index-cleaner:1.29", "jaegertracing/jaeger-operator:1.29",
                   "jaegertracing/jaeger-query:1.29", "kubesphere/kiali-operator:v1.50.1", "kubesphere/kiali:v1.50"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: apply_defaults(changes) for name, changes in SCENARIOS.items()}
    return render_scenarios("servicemesh", "ks_servicemesh_objects", scenarios, tmp_path_factory.mktemp("mesh"))


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: apply_defaults(SCENARIOS[name]) for name in ("default", "external_es", "external_os_no_auth")}
    return render_scenarios("servicemesh", "ks_servicemesh_secrets", scenarios, tmp_path_factory.mktemp("secrets"))


def inventory() -> dict[tuple[str, str, str], str]:
    objects = json.loads((REPO / "tests" / "parity" / "upstream" / "servicemesh.json").read_text())["objects"]
    return {(o["kind"], o["namespace"] or "", o["name"]): o["apiVersion"] for o in objects}


def images(objects: Objects) -> set[str]:
    text = json.dumps(objects)
    return {ref for ref in UPSTREAM_IMAGES if f'"{ref}"' in text} | {
        f"{o['spec']['deployment']['image_name']}:{o['spec']['deployment']['image_version']}"
        for o in objects if o["kind"] == "Kiali"}


def test_objects_are_upstreams(rendered: dict[str, Objects], secrets: dict[str, Objects]) -> None:
    upstream = inventory()
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)), name
        if name == "istio":
            continue  # autoscaling off: no HPA (below)
        assert keys(objects) == (set(upstream) - {("Secret", NS, "jaeger-secret")}) | {("Namespace", "", NS)}, name
        assert {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o["apiVersion"]
                for o in objects if o["kind"] != "Namespace"} == {k: v for k, v in upstream.items() if k[0] != "Secret"}
    assert keys(secrets["default"]) == {("Secret", NS, "jaeger-secret")}
    assert images(rendered["default"]) == UPSTREAM_IMAGES
    labels = find(rendered["default"], "Namespace", NS)["metadata"]["labels"]
    assert labels == {"kubesphere.io/workspace": "system-workspace", "kubesphere.io/namespace": NS}


def test_istiod_as_istio_1_14_ships_it(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    deployment = find(objects, "Deployment", ISTIOD)
    assert "replicas" not in deployment["spec"]  # the HPA scales it
    assert deployment["spec"]["selector"]["matchLabels"] == {"app": "istiod", "istio.io/rev": "1-14-6"}
    assert deployment["metadata"]["labels"]["operator.istio.io/component"] == "Pilot"
    spec = pod(objects, "Deployment", ISTIOD)
    (discovery,) = spec["containers"]
    assert discovery["image"] == "istio/pilot:1.14.6"
    assert discovery["args"] == ["discovery", "--monitoringAddr=:15014", "--log_output_level=default:info",
                                 "--domain", "cluster.local", "--keepaliveMaxServerConnectionAge", "30m"]
    assert [p["containerPort"] for p in discovery["ports"]] == [8080, 15010, 15017]
    assert discovery["readinessProbe"]["httpGet"] == {"path": "/ready", "port": 8080}
    env = {e["name"]: e.get("value") for e in discovery["env"]}
    assert env["REVISION"] == "1-14-6" and env["JWT_POLICY"] == "first-party-jwt"
    assert env["ISTIOD_ADDR"] == "istiod-1-14-6.istio-system.svc:15012" and env["PILOT_TRACE_SAMPLING"] == "1"
    assert discovery["resources"] == {"requests": {"cpu": "500m", "memory": "2048Mi"}}
    assert spec["serviceAccountName"] == ISTIOD and "nodeSelector" not in spec
    service = find(objects, "Service", ISTIOD)["spec"]
    assert {(p["name"], p["port"]) for p in service["ports"]} == {
        ("grpc-xds", 15010), ("https-dns", 15012), ("https-webhook", 443), ("http-monitoring", 15014)}
    assert service["selector"] == deployment["spec"]["selector"]["matchLabels"]
    hpa = find(objects, "HorizontalPodAutoscaler", ISTIOD)["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 5)
    assert find(objects, "PodDisruptionBudget", ISTIOD)["spec"]["minAvailable"] == 1
    mesh = yaml.safe_load(find(objects, "ConfigMap", "istio-1-14-6")["data"]["mesh"])
    assert mesh["defaultConfig"]["tracing"]["zipkin"]["address"] == "jaeger-collector.istio-system.svc:9411"
    assert mesh["defaultConfig"]["discoveryAddress"] == "istiod-1-14-6.istio-system.svc:15012"
    assert mesh["enablePrometheusMerge"] is True and mesh["rootNamespace"] == NS
    injector = find(objects, "ConfigMap", "istio-sidecar-injector-1-14-6")["data"]
    assert yaml.safe_load(injector["config"])["policy"] == "disabled"
    values = json.loads(injector["values"])
    assert values["revision"] == "1-14-6" and values["global"]["proxy"]["image"] == "istio/proxyv2:1.14.6"
    filters = [o for o in objects if o["kind"] == "EnvoyFilter"]
    assert len(filters) == 10 and all(o["metadata"]["labels"]["istio.io/rev"] == "1-14-6" for o in filters)
    crd = find(objects, "CustomResourceDefinition", "virtualservices.networking.istio.io")["spec"]
    assert [(v["name"], v["storage"]) for v in crd["versions"]] == [("v1alpha3", True), ("v1beta1", False)]
    assert crd["names"]["shortNames"] == ["vs"]


def test_webhooks_as_kubesphere_patched_them(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    injector = find(objects, "MutatingWebhookConfiguration", "istio-sidecar-injector-1-14-6")["webhooks"]
    assert [w["name"] for w in injector] == ["rev.namespace.sidecar-injector.istio.io",
                                             "rev.object.sidecar-injector.istio.io"]
    # upstream removed /webhooks/1/objectSelector/matchExpressions/1 (istio.io/rev In [1-14-6])
    assert injector[1]["objectSelector"]["matchExpressions"] == [
        {"key": "sidecar.istio.io/inject", "operator": "NotIn", "values": ["false"]}]
    tag = find(objects, "MutatingWebhookConfiguration", "istio-revision-tag-default")["webhooks"]
    assert len(tag) == 4
    validators = [find(objects, "ValidatingWebhookConfiguration", n)["webhooks"]
                  for n in ("istio-validator-1-14-6-istio-system", "istiod-default-validator")]
    for hook in injector + tag + [w for v in validators for w in v]:
        assert hook["clientConfig"]["service"]["name"] == ISTIOD
        assert "caBundle" not in hook["clientConfig"]  # istiod patches it in
    assert {w["failurePolicy"] for v in validators for w in v} == {"Ignore"}
    assert {w["failurePolicy"] for w in injector + tag} == {"Fail"}


def test_operators_and_custom_resources(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    jaeger_op = pod(objects, "Deployment", "jaeger-operator")["containers"][0]
    assert jaeger_op["image"] == "jaegertracing/jaeger-operator:1.29" and jaeger_op["args"] == ["start"]
    assert jaeger_op["resources"] == {"limits": {"cpu": "100m", "memory": "128Mi"},
                                      "requests": {"cpu": "20m", "memory": "50Mi"}}
    kiali_op = pod(objects, "Deployment", "kiali-operator")["containers"][0]
    assert kiali_op["image"] == "kubesphere/kiali-operator:v1.50.1"
    # The pod template's metadata and empty affinity are the chart's (a switch from v3.4.1 keeps the pod).
    theirs = next(o for step in upstream_fixture.load("pluggable").modules["servicemesh"] for o in step.objects
                  if (o["kind"], o["metadata"]["name"]) == ("Deployment", "kiali-operator"))["spec"]["template"]
    template = find(objects, "Deployment", "kiali-operator")["spec"]["template"]
    assert template["metadata"] == theirs["metadata"]
    assert template["spec"]["affinity"] == theirs["spec"]["affinity"] == {}
    assert {"name": "WATCH_NAMESPACE", "value": NS} in kiali_op["env"]
    jaeger = find(objects, "Jaeger", "jaeger")["spec"]
    assert jaeger["strategy"] == "production" and jaeger["collector"]["maxReplicas"] == 5
    assert jaeger["storage"]["options"]["es"] == {
        "index-prefix": "whizard", "tls": {"enabled": True, "skip-host-verify": True}, "version": 7,
        "server-urls": "https://opensearch-cluster-data.kubesphere-logging-system.svc:9200"}
    assert jaeger["storage"]["secretName"] == "jaeger-secret"
    kiali = find(objects, "Kiali", "kiali")["spec"]
    assert kiali["auth"]["strategy"] == "token"
    assert kiali["external_services"]["tracing"]["url"] == "http://jaeger-query.istio-system.svc:16686"
    assert find(objects, "CustomResourceDefinition", "jaegers.jaegertracing.io")["metadata"]["labels"] == {
        "app": "jaeger-operator"}


def test_resources_from_the_spec(rendered: dict[str, Objects]) -> None:
    objects = rendered["resources"]
    collector = find(objects, "Jaeger", "jaeger")["spec"]["collector"]["resources"]
    assert collector == {"limits": {"cpu": "100m", "memory": "1Gi"}, "requests": {"cpu": "20m", "memory": "50Mi"}}
    operator = pod(objects, "Deployment", "jaeger-operator")["containers"][0]["resources"]
    assert operator == {"limits": {"cpu": "100m", "memory": "128Mi"}, "requests": {"cpu": "50m", "memory": "50Mi"}}


def test_scheduling_module_first_then_global(rendered: dict[str, Objects]) -> None:
    for name in ("jaeger-operator", "kiali-operator", ISTIOD):
        spec = pod(rendered["scheduling"], "Deployment", name)
        assert spec["nodeSelector"] == {"pool": "mesh"}, name
        assert spec["tolerations"] == [{"operator": "Exists"}] and spec["affinity"] == ZONE, name


def test_local_registry(rendered: dict[str, Objects]) -> None:
    objects = rendered["registry"]
    assert pod(objects, "Deployment", ISTIOD)["containers"][0]["image"] == "registry.local:5000/istio/pilot:1.14.6"
    assert pod(objects, "Deployment", "kiali-operator")["containers"][0]["image"] == (
        "registry.local:5000/kubesphere/kiali-operator:v1.50.1")
    jaeger = find(objects, "Jaeger", "jaeger")["spec"]
    assert jaeger["query"]["image"] == "registry.local:5000/jaegertracing/jaeger-query:1.29"
    kiali = find(objects, "Kiali", "kiali")["spec"]["deployment"]
    assert (kiali["image_name"], kiali["image_version"]) == ("registry.local:5000/kubesphere/kiali", "v1.50")
    values = json.loads(find(objects, "ConfigMap", "istio-sidecar-injector-1-14-6")["data"]["values"])
    assert values["global"]["proxy"]["image"] == "registry.local:5000/istio/proxyv2:1.14.6"


def test_istio_profile_overrides(rendered: dict[str, Objects]) -> None:
    objects = rendered["istio"]
    assert not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    deployment = find(objects, "Deployment", ISTIOD)
    assert deployment["spec"]["replicas"] == 2
    spec = deployment["spec"]["template"]["spec"]
    (discovery,) = spec["containers"]
    assert discovery["image"] == "mirror.local/istio/pilot:1.14.6-patched"
    assert "--log_output_level=default:debug" in discovery["args"]
    assert discovery["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert [e["value"] for e in discovery["env"] if e["name"] == "PILOT_TRACE_SAMPLING"] == ["5"]
    assert spec["nodeSelector"] == {"mesh": "yes"}
    mesh = yaml.safe_load(find(objects, "ConfigMap", "istio-1-14-6")["data"]["mesh"])
    assert mesh["accessLogFile"] == "/dev/stdout" and mesh["defaultConfig"]["holdApplicationUntilProxyStarts"]
    assert mesh["defaultConfig"]["tracing"]["zipkin"]["address"] == "jaeger-collector.istio-system.svc:9411"
    injector = find(objects, "ConfigMap", "istio-sidecar-injector-1-14-6")["data"]
    assert yaml.safe_load(injector["config"])["templates"] == {"sidecar": "spec: {}"}
    assert json.loads(injector["values"])["global"]["proxy"]["image"] == "mirror.local/istio/proxyv2:1.14.6-patched"
    state = find(objects, "IstioOperator", "installed-state-1-14-6")["spec"]
    assert (state["hub"], state["tag"], state["revision"]) == ("mirror.local/istio", "1.14.6-patched", "1-14-6")
    assert state["components"]["ingressGateways"] == [{"name": "istio-ingressgateway", "enabled": False}]


def test_log_store_variants(rendered: dict[str, Objects], secrets: dict[str, Objects]) -> None:
    es = find(rendered["external_es"], "Jaeger", "jaeger")["spec"]["storage"]
    assert es["options"]["es"] == {"index-prefix": "prod", "server-urls": "http://es.local:9200"}
    assert es["secretName"] == "jaeger-secret"
    (secret,) = secrets["external_es"]
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "ES_USERNAME": "elastic", "ES_PASSWORD": "s3cret"}
    (default,) = secrets["default"]
    assert base64.b64decode(default["data"]["ES_USERNAME"]).decode() == "admin"
    external = find(rendered["external_os_no_auth"], "Jaeger", "jaeger")["spec"]["storage"]
    assert external["options"]["es"]["server-urls"] == "https://os.local:9201"
    assert "secretName" not in external and secrets["external_os_no_auth"] == []
