"""The ks-monitor role's manifests, rendered by Ansible for several specs (no cluster needed)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_harness import Objects, engine_vars, filter_plugins, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "ks-monitor"
NS = "kubesphere-monitoring-system"
CERTS = "/etc/prometheus/secrets/kube-etcd-client-certs/"
ETCD_ON = {"monitoring": True, "endpointIps": "10.0.0.1, 10.0.0.2", "port": 2379, "tlsEnable": True}
RESOURCES = {"limits": {"cpu": "3", "memory": "1Gi"}, "requests": {"cpu": "30m", "memory": "40Mi"}}
TOLERATE_ALL = [{"operator": "Exists"}]
ZONE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}

# The built-in alerting rule groups (cluster-scoped GlobalRuleGroups) of the default cc.
RULE_GROUPS = ["alertmanager-rules", "config-reloaders", "ks-apiserver", "ks-controller-manager", "kube-apiserver-slos",
               "kube-state-metrics", "kubernetes-apps", "kubernetes-resources", "kubernetes-storage",
               "kubernetes-system", "kubernetes-system-apiserver", "kubernetes-system-controller-manager",
               "kubernetes-system-kubelet", "kubernetes-system-scheduler", "node-exporter", "prometheus",
               "prometheus-operator"]
BUILTIN = {"alerting.kubesphere.io/builtin": "true", "alerting.kubesphere.io/enable": "true"}
INITIAL = "alerting.kubesphere.io/initial-configuration"

# What ks-installer v3.4.1 created (tests/parity/upstream/monitoring*.json): the default cc, and what etcd
# monitoring, Grafana, the GPU exporter and the Istio monitors added. Helm hooks Helm deleted once they succeeded
# (notification-manager's post-install Job, which patched the CRDs' conversion CA in: rendered with it here) are not
# expected to stay.
PARITY = REPO / "tests" / "parity" / "upstream"


def inventory(name: str) -> set[tuple[str, str, str]]:
    objects = json.loads((PARITY / f"{name}.json").read_text())["objects"]
    return {(o["kind"], o["namespace"] or "", o["name"]) for o in objects
            if "hook-succeeded" not in (o.get("hook_delete_policy") or "")}


UPSTREAM = inventory("monitoring")
UPSTREAM_ETCD = inventory("monitoring-etcd")
UPSTREAM_GRAFANA = inventory("monitoring-grafana")
UPSTREAM_GPU = inventory("monitoring-gpu")
UPSTREAM_ISTIO = inventory("monitoring-istio")
# Not rendered but applied by tasks/main.yaml: notification-manager's webhook certificate (ks_webhook_cert).
GENERATED = {("Secret", NS, "notification-manager-webhook-server-cert")}
# Rendered with the Istio monitors: upstream's init-namespaces made istio-system for servicemesh.
ISTIO_NAMESPACE = {("Namespace", "", "istio-system")}
GRAFANA_DASHBOARDS = ["alertmanager-overview", "apiserver", "cluster-total", "controller-manager",
                      "k8s-resources-cluster", "k8s-resources-namespace", "k8s-resources-node", "k8s-resources-pod",
                      "k8s-resources-workload", "k8s-resources-workloads-namespace", "kubelet", "namespace-by-pod",
                      "namespace-by-workload", "node-cluster-rsrc-use", "node-rsrc-use", "nodes",
                      "persistentvolumesusage", "pod-total", "prometheus-remote-write", "prometheus", "proxy",
                      "scheduler", "workload-total"]
NM_CRDS = {f"{p}.notification.kubesphere.io" for p in ("configs", "notificationmanagers", "receivers", "routers",
                                                        "silences")}
CA = "Q0EgUEVN"
GRAFANA = {"grafana": {"enabled": True}}
GPU = {"gpu": {"nvidia_dcgm_exporter": {"enabled": True}}}
SERVICEMESH = {"servicemesh": {"enabled": True}}
MONITOR_CRDS = ["servicemonitors.monitoring.coreos.com", "podmonitors.monitoring.coreos.com"]
EXTERNAL = {"common": {"monitoring": {"type": "external", "endpoint": "http://prom.example:9090"}}}

# name → (spec changes, extra variables)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {}),
    "three_nodes": ({}, {"nodeNum": 3}),
    "tuned": ({"monitoring": {"storageClass": "fast", "node_exporter": {"port": 9200, "resources": RESOURCES},
                              "prometheus": {"replicas": 3, "volumeSize": "50Gi", "resources": {"limits": {"cpu": "2"}},
                                             "operator": {"resources": RESOURCES}},
                              "alertmanager": {"replicas": 2, "resources": {"requests": {"memory": "64Mi"}}},
                              "kube_rbac_proxy": {"resources": RESOURCES},
                              "kube_state_metrics": {"resources": RESOURCES},
                              "notification_manager": {"operator": {"resources": RESOURCES},
                                                       "proxy": {"resources": RESOURCES}}},
               "persistence": {"storageClass": "slow"}, "nodeSelector": {"role": "monitoring"},
               "local_registry": "registry.local:5000", "namespace_override": "mirror"}, {"nodeNum": 3}),
    "scheduling": ({"monitoring": {"nodeSelector": {"monitoring": "yes"}, "affinity": ZONE_AFFINITY},
                    "nodeSelector": {"global": "yes"}, "tolerations": TOLERATE_ALL}, {}),
    "legacy_keys": ({"monitoring": {"prometheusReplicas": 4, "prometheusVolumeSize": "30Gi",
                                    "alertmanagerReplicas": 2}}, {}),
    "live": ({"monitoring": {"prometheus": {"volumeSize": "50Gi"}}},
             {"ks_monitor_live_retention": "30d", "ks_monitor_live_volume_size": "80Gi"}),
    "old_kubernetes": ({}, {"kubernetes_version": "v1.20.15"}),
    "zone_cn": ({"zone": "cn"}, {}),
    "persistence_class": ({"persistence": {"storageClass": "slow"}}, {}),
    "etcd_certs_missing": ({"etcd": ETCD_ON}, {"ks_monitor_etcd_certs_missing": ["etcd-client.key"]}),
    "etcd_certs_ready": ({"etcd": ETCD_ON}, {}),
    "etcd_plain": ({"etcd": {**ETCD_ON, "tlsEnable": False}}, {}),
    "external": ({**EXTERNAL, "monitoring": GPU, **SERVICEMESH, "etcd": ETCD_ON}, {}),
    "extras": ({"monitoring": {**GRAFANA, **GPU}, **SERVICEMESH}, {"ks_monitor_nm_ca_bundle": CA}),
    "extras_tuned": ({"monitoring": {"grafana": {"enabled": True},
                                     "gpu": {"nvidia_dcgm_exporter": {"enabled": True, "resources": RESOURCES}},
                                     "notification_manager": {"resources": {"limits": {"memory": "1Gi"}},
                                                              "operator": {"resources": RESOURCES},
                                                              "proxy": {"resources": {"requests": {"cpu": "7m"}}}},
                                     "nodeSelector": {"monitoring": "yes"}, "affinity": ZONE_AFFINITY},
                      "tolerations": TOLERATE_ALL, "local_registry": "registry.local:5000", **SERVICEMESH},
                     {"nodeNum": 3}),
    "external_extras": ({**EXTERNAL, "monitoring": {**GRAFANA, **GPU}, **SERVICEMESH},
                        {"ks_monitor_served_monitor_crds": MONITOR_CRDS}),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), "nodeNum": 1, "kubernetes_version": "v1.34.4", **extra}
                 for name, (changes, extra) in SCENARIOS.items()}
    return render_scenarios("ks-monitor", "ks_monitor_objects", scenarios, tmp_path_factory.mktemp("ks-monitor"),
                            engine_vars("monitoring"))


def containers(objects: Objects, kind: str, name: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod(objects, kind, name)["containers"]}


def all_containers(objects: Objects) -> dict[str, dict[str, Any]]:
    """Every container of the stack's workloads, keyed "<workload>/<container>"."""
    return {f"{o['metadata']['name']}/{c['name']}": c for o in objects if o["kind"] in ("Deployment", "DaemonSet")
            for c in o["spec"]["template"]["spec"]["containers"]}


def test_every_upstream_object_is_rendered(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    assert keys(objects) == UPSTREAM - GENERATED, (sorted(UPSTREAM - keys(objects)), sorted(keys(objects) - UPSTREAM))
    for name, scenario in rendered.items():
        assert len(scenario) == len(keys(scenario)), f"{name}: an object is rendered twice"
    assert keys(rendered["etcd_certs_ready"]) - keys(objects) == UPSTREAM_ETCD
    assert keys(rendered["extras"]) == (UPSTREAM - GENERATED) | UPSTREAM_GRAFANA | UPSTREAM_GPU | UPSTREAM_ISTIO \
        | ISTIO_NAMESPACE
    assert keys(rendered["extras_tuned"]) == keys(rendered["extras"])
    # An external Prometheus: no stack, no notification-manager, no Grafana; the GPU exporter and the Istio
    # monitors stay (their monitors where the cluster serves the CRDs).
    dashboards = {("CustomResourceDefinition", "", f"{k}.monitoring.kubesphere.io") for k in ("dashboards",
                                                                                            "clusterdashboards")}
    assert keys(rendered["external_extras"]) == dashboards | UPSTREAM_GPU | UPSTREAM_ISTIO | ISTIO_NAMESPACE
    assert keys(rendered["external"]) == dashboards | ISTIO_NAMESPACE | {  # no monitor CRD served
        k for k in UPSTREAM_GPU if k[0] != "ServiceMonitor"}


def test_images_come_from_the_catalogue(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    operator = containers(objects, "Deployment", "prometheus-operator")["prometheus-operator"]
    assert operator["image"] == "kubesphere/prometheus-operator:v0.55.1"
    assert "--prometheus-config-reloader=kubesphere/prometheus-config-reloader:v0.55.1" in operator["args"]
    assert find(objects, "Prometheus", "k8s")["spec"]["image"] == "prom/prometheus:v2.39.1"
    assert find(objects, "Alertmanager", "main")["spec"]["image"] == "prom/alertmanager:v0.23.0"
    cn = "registry.cn-beijing.aliyuncs.com/kubesphereio/"
    assert {c["image"] for c in all_containers(rendered["zone_cn"]).values()} == {
        cn + "prometheus-operator:v0.55.1", cn + "kube-rbac-proxy:v0.11.0", cn + "node-exporter:v1.3.1",
        cn + "kube-state-metrics:v2.6.0", cn + "notification-manager-operator:v2.3.0"}
    mirror = "registry.local:5000/mirror/"
    assert find(rendered["tuned"], "Prometheus", "k8s")["spec"]["image"] == mirror + "prometheus:v2.39.1"
    assert all(c["image"].startswith(mirror) for c in all_containers(rendered["tuned"]).values())


def test_prometheus_defaults(rendered: dict[str, Objects]) -> None:
    spec = find(rendered["default"], "Prometheus", "k8s")["spec"]
    assert spec["replicas"] == 1
    assert spec["retention"] == "7d"
    # Every ServiceMonitor in the cluster is scraped, the user's own included.
    assert spec["serviceMonitorSelector"] == {} and spec["serviceMonitorNamespaceSelector"] == {}
    assert spec["ruleSelector"] == {"matchLabels": {"prometheus": "k8s", "role": "alert-rules"}}
    claim = spec["storage"]["volumeClaimTemplate"]["spec"]
    assert claim == {"resources": {"requests": {"storage": "20Gi"}}}
    assert "secrets" not in spec
    assert spec["resources"] == {"limits": {"cpu": "4", "memory": "16Gi"},
                                 "requests": {"cpu": "200m", "memory": "400Mi"}}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "monitoring",
                                    "effect": "NoSchedule"}]
    assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"] == {
        "matchExpressions": [{"key": "node-role.kubernetes.io/monitoring", "operator": "Exists"}]}
    anti = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert anti["labelSelector"]["matchLabels"] == find(rendered["default"], "Service", "prometheus-k8s")["spec"][
        "selector"]
    persistence = find(rendered["persistence_class"], "Prometheus", "k8s")["spec"]
    assert persistence["storage"]["volumeClaimTemplate"]["spec"]["storageClassName"] == "slow"


def test_alertmanager_defaults(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    spec = find(objects, "Alertmanager", "main")["spec"]
    assert spec["replicas"] == 1
    assert spec["resources"] == {"limits": {"cpu": "200m", "memory": "200Mi"},
                                 "requests": {"cpu": "20m", "memory": "30Mi"}}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"} and "tolerations" not in spec
    term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["labelSelector"] == {
        "matchExpressions": [{"key": "alertmanager", "operator": "In", "values": ["main"]}]}
    config = yaml.safe_load(base64.b64decode(find(objects, "Secret", "alertmanager-main")["data"]["alertmanager.yaml"]))
    assert [r["name"] for r in config["receivers"]] == [
        "Default", "null", "Watchdog", "prometheus", "event", "auditing"]
    assert config["route"]["routes"][-1] == {"receiver": "prometheus", "match_re": {"alerttype": ".*"}}
    assert config["receivers"][3]["webhook_configs"][0]["url"] == \
        "http://notification-manager-svc.kubesphere-monitoring-system.svc:19093/api/v2/alerts"


def test_replicas_follow_the_node_count(rendered: dict[str, Objects]) -> None:
    three = rendered["three_nodes"]
    assert find(three, "Prometheus", "k8s")["spec"]["replicas"] == 2
    assert find(three, "Alertmanager", "main")["spec"]["replicas"] == 3
    legacy = rendered["legacy_keys"]  # pre-v3.1 spellings still count
    assert find(legacy, "Prometheus", "k8s")["spec"]["replicas"] == 4
    assert find(legacy, "Alertmanager", "main")["spec"]["replicas"] == 2
    assert find(legacy, "Prometheus", "k8s")["spec"]["storage"]["volumeClaimTemplate"]["spec"]["resources"] == {
        "requests": {"storage": "30Gi"}}


def test_services_and_disruption_budgets(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    for name, port in [("prometheus-k8s", 9090), ("alertmanager-main", 9093)]:
        service = find(objects, "Service", name)["spec"]
        assert service["ports"] == [{"name": "web", "port": port, "targetPort": "web"},
                                    {"name": "reloader-web", "port": 8080, "targetPort": "reloader-web"}]
        monitor = find(objects, "ServiceMonitor", name)["spec"]
        assert [e["port"] for e in monitor["endpoints"]] == ["web", "reloader-web"]
        assert monitor["selector"]["matchLabels"] == service["selector"]
        pdb = find(objects, "PodDisruptionBudget", name)
        assert pdb["apiVersion"] == "policy/v1"
        assert pdb["spec"]["selector"]["matchLabels"] == service["selector"]
    assert find(objects, "PodDisruptionBudget", "prometheus-k8s")["spec"]["minAvailable"] == 1
    assert find(objects, "PodDisruptionBudget", "alertmanager-main")["spec"]["maxUnavailable"] == 1
    assert find(rendered["old_kubernetes"], "PodDisruptionBudget", "prometheus-k8s")["apiVersion"] == "policy/v1beta1"
    for component, port in [("kube-controller-manager", 10257), ("kube-scheduler", 10259)]:
        service = find(objects, "Service", f"{component}-svc")
        assert service["metadata"]["namespace"] == "kube-system"
        assert service["spec"] == {"clusterIP": "None", "selector": {"component": component},
                                   "ports": [{"name": "https-metrics", "port": port, "targetPort": port}]}
        monitor = find(objects, "ServiceMonitor", component)["spec"]
        assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert monitor["namespaceSelector"] == {"matchNames": ["kube-system"]}
    coredns = find(objects, "ServiceMonitor", "coredns")["spec"]
    assert coredns["selector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert coredns["endpoints"][0]["port"] == "metrics"


def test_apiserver_drops_upstreams_metrics(rendered: dict[str, Objects]) -> None:
    # ks-installer v3.4.1 roles/ks-monitor/files/prometheus/kubernetes/kubernetes-serviceMonitorApiserver.yaml
    (endpoint,) = find(rendered["default"], "ServiceMonitor", "kube-apiserver")["spec"]["endpoints"]
    drops = endpoint["metricRelabelings"]
    assert len(drops) == 12 and all(d["action"] == "drop" for d in drops)
    assert drops[-1] == {"action": "drop", "sourceLabels": ["__name__", "le"], "regex": (
        "apiserver_request_duration_seconds_bucket;"
        "(0.15|0.25|0.3|0.35|0.4|0.45|0.6|0.7|0.8|0.9|1.25|1.5|1.75|2.5|3|3.5|4.5|6|7|8|9|15|25|30|50)")}
    assert [d["regex"] for d in drops[8:11]] == [
        "etcd_(debugging|disk|server).*", "apiserver_admission_controller_admission_latencies_seconds_.*",
        "apiserver_admission_step_admission_latencies_seconds_.*"]
    queues = ["admission_quota_controller", "APIServiceOpenAPIAggregationControllerQueue1",
              "APIServiceRegistrationController", "autoregister", "AvailableConditionController",
              "crd_autoregistration_controller", "crdEstablishing", "crd_finalizer", "crd_naming_condition_controller",
              "crd_openapi_controller", "DiscoveryController", "non_structural_schema_condition_controller"]
    metrics = ["adds", "depth", "longest_running_processor_microseconds", "queue_latency", "retries",
               "unfinished_work_seconds", "work_duration"]
    queue_drop = drops[7]["regex"]
    assert queue_drop.startswith("(") and queue_drop.endswith(")")
    assert set(queue_drop[1:-1].split("|")) == {f"{q}_{m}" for q in queues for m in metrics} - {
        "admission_quota_controller_retries"} | {
        "kubeproxy_sync_proxy_rules_latency_microseconds", "rest_client_request_latency_seconds",
        "storage_operation_errors_total", "storage_operation_status_count"}


def test_prometheus_reads_its_config_through_a_role(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    assert find(objects, "Role", "prometheus-k8s-config")["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    binding = find(objects, "RoleBinding", "prometheus-k8s-config")
    assert binding["roleRef"]["name"] == "prometheus-k8s-config"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": NS}]
    ksm_rules = find(objects, "ClusterRole", "kubesphere-kube-state-metrics")["rules"]
    assert {"apiGroups": ["iam.kubesphere.io"], "resources": ["users"], "verbs": ["list", "watch"]} in ksm_rules


def test_every_container_has_upstream_resources(rendered: dict[str, Objects]) -> None:
    proxy = {"limits": {"cpu": "1", "memory": "100Mi"}, "requests": {"cpu": "10m", "memory": "20Mi"}}
    assert {name: c["resources"] for name, c in all_containers(rendered["default"]).items()} == {
        "prometheus-operator/prometheus-operator": {"limits": {"cpu": "200m", "memory": "200Mi"},
                                                    "requests": {"cpu": "100m", "memory": "100Mi"}},
        "prometheus-operator/kube-rbac-proxy": proxy,
        "node-exporter/node-exporter": {"limits": {"cpu": "1", "memory": "500Mi"},
                                        "requests": {"cpu": "102m", "memory": "180Mi"}},
        "node-exporter/kube-rbac-proxy": proxy,
        "kube-state-metrics/kube-state-metrics": {"limits": {"cpu": "1", "memory": "8Gi"},
                                                  "requests": {"cpu": "100m", "memory": "150Mi"}},
        "kube-state-metrics/kube-rbac-proxy-main": proxy,
        "kube-state-metrics/kube-rbac-proxy-self": proxy,
        "notification-manager-operator/kube-rbac-proxy": {"limits": {"cpu": "50m", "memory": "50Mi"},
                                                         "requests": {"cpu": "5m", "memory": "10Mi"}},
        "notification-manager-operator/notification-manager-operator": {
            "limits": {"cpu": "50m", "memory": "50Mi"}, "requests": {"cpu": "5m", "memory": "20Mi"}},
    }


def test_spec_resources_replace_the_defaults_field_by_field(rendered: dict[str, Objects]) -> None:
    objects = rendered["tuned"]
    assert {name: c["resources"] for name, c in all_containers(objects).items()} == dict.fromkeys(
        all_containers(objects), RESOURCES)
    assert find(objects, "Prometheus", "k8s")["spec"]["resources"] == {
        "limits": {"cpu": "2", "memory": "16Gi"}, "requests": {"cpu": "200m", "memory": "400Mi"}}
    assert find(objects, "Alertmanager", "main")["spec"]["resources"] == {
        "limits": {"cpu": "200m", "memory": "200Mi"}, "requests": {"cpu": "20m", "memory": "64Mi"}}


def test_spec_settings_reach_the_objects(rendered: dict[str, Objects]) -> None:
    objects = rendered["tuned"]
    spec = find(objects, "Prometheus", "k8s")["spec"]
    assert spec["replicas"] == 3
    claim = spec["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "fast"  # monitoring.storageClass wins over persistence.storageClass
    assert claim["resources"]["requests"]["storage"] == "50Gi"
    assert find(objects, "Alertmanager", "main")["spec"]["replicas"] == 2
    node_exporter = containers(objects, "DaemonSet", "node-exporter")
    assert node_exporter["kube-rbac-proxy"]["ports"] == [{"name": "https", "containerPort": 9200, "hostPort": 9200}]
    assert "--web.listen-address=127.0.0.1:9200" in node_exporter["node-exporter"]["args"]
    assert find(objects, "Service", "node-exporter")["spec"]["ports"][0]["port"] == 9200


def test_scheduling_prefers_monitoring_then_global_settings(rendered: dict[str, Objects]) -> None:
    objects = rendered["scheduling"]
    wanted = {"nodeSelector": {"monitoring": "yes"}, "tolerations": TOLERATE_ALL, "affinity": ZONE_AFFINITY}
    for kind, name in [("Prometheus", "k8s"), ("Alertmanager", "main")]:
        spec = find(objects, kind, name)["spec"]
        assert {k: spec[k] for k in wanted} == wanted, name
    for name in ("prometheus-operator", "kube-state-metrics", "notification-manager-operator"):
        spec = pod(objects, "Deployment", name)
        assert {k: spec[k] for k in wanted} == wanted, name
        assert not pod(rendered["default"], "Deployment", name).get("tolerations")
    assert {k: find(objects, "NotificationManager", "notification-manager")["spec"][k] for k in wanted} == wanted
    # The global nodeSelector applies when monitoring has none; node-exporter runs on every node regardless.
    assert find(rendered["tuned"], "Prometheus", "k8s")["spec"]["nodeSelector"] == {"role": "monitoring"}
    assert pod(rendered["tuned"], "Deployment", "kube-state-metrics")["nodeSelector"] == {"role": "monitoring"}
    node_exporter = pod(objects, "DaemonSet", "node-exporter")
    assert node_exporter["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert node_exporter["tolerations"] == [{"operator": "Exists"}]


def test_exporters(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    ksm = containers(objects, "Deployment", "kube-state-metrics")["kube-state-metrics"]
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in ksm["args"]}
    assert args["--metric-labels-allowlist"] == \
        "namespaces=[kubesphere.io/workspace],storageclasses=[storage.kubesphere.io/storagetype]"
    denied = args["--metric-denylist"].split(",")
    assert len(denied) == 17 and "kube_node_info" in denied and "kube_.+_created" in denied
    assert ksm["volumeMounts"] == [{"name": "host-time", "mountPath": "/etc/localtime", "readOnly": True}]
    assert {"name": "host-time", "hostPath": {"path": "/etc/localtime", "type": ""}} in \
        pod(objects, "Deployment", "kube-state-metrics")["volumes"]
    # Flags node-exporter v1.3.1 knows, as upstream's DaemonSet had them (the filesystem excludes under the names v1.3
    # still reads): a switch from v3.4.1 does not restart it.
    exporter = containers(objects, "DaemonSet", "node-exporter")["node-exporter"]
    assert [a.split("=", 1)[0] for a in exporter["args"]] == [
        "--web.listen-address", "--path.procfs", "--path.sysfs", "--path.rootfs", "--no-collector.wifi",
        "--no-collector.hwmon", "--collector.filesystem.ignored-mount-points",
        "--collector.filesystem.ignored-fs-types"]
    # Upstream's pod templates (templates/*-deployment.yaml.j2 and node-exporter's DaemonSet of roles/ks-monitor at
    # v3.4.1): `affinity: {}`, the default-container annotation only on prometheus-operator, whose version label keeps
    # the tag's "v".
    for name in ("kube-state-metrics", "prometheus-operator"):
        assert pod(objects, "Deployment", name)["affinity"] == {}
    ksm_template = find(objects, "Deployment", "kube-state-metrics")["spec"]["template"]["metadata"]
    operator_template = find(objects, "Deployment", "prometheus-operator")["spec"]["template"]["metadata"]
    assert "annotations" not in ksm_template
    assert "annotations" not in find(objects, "DaemonSet", "node-exporter")["spec"]["template"]["metadata"]
    assert operator_template["annotations"] == {"kubectl.kubernetes.io/default-container": "prometheus-operator"}
    assert operator_template["labels"]["app.kubernetes.io/version"].startswith("v")
    assert not find(objects, "Deployment", "prometheus-operator")["metadata"]["labels"][
        "app.kubernetes.io/version"].startswith("v")
    # Selectors are upstream's: an upgrade from ks-installer v3.4.1 must not change an immutable selector.
    for kind, name, component in [("Deployment", "prometheus-operator", "controller"),
                                  ("Deployment", "kube-state-metrics", "exporter"),
                                  ("DaemonSet", "node-exporter", "exporter")]:
        assert find(objects, kind, name)["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/component": component, "app.kubernetes.io/name": name,
            "app.kubernetes.io/part-of": "kube-prometheus"}


def test_prometheus_rules(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    rules = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PrometheusRule"}
    for rule in rules.values():
        assert rule["metadata"]["labels"].items() >= {"prometheus": "k8s", "role": "alert-rules"}.items()
    groups = {name: [g["name"] for g in rule["spec"]["groups"]] for name, rule in rules.items()}
    assert groups == {
        "prometheus-k8s-rules": ["k8s.rules", "node.rules", "cluster.rules", "namespace.rules", "apiserver.rules",
                                 "scheduler.rules", "scheduler_histogram.rules", "controller_manager.rules",
                                 "coredns.rules", "kube-apiserver-burnrate.rules", "kube-apiserver-histogram.rules",
                                 "kube-apiserver-availability.rules", "kubelet.rules"],
        "prometheus-k8s-prometheus-rules": ["prometheus.rules"],
        "alertmanager-main-rules": [], "prometheus-operator-rules": [], "node-exporter-rules": [],
        "kube-state-metrics-rules": []}
    records = {r["record"] for g in rules["prometheus-k8s-rules"]["spec"]["groups"] for r in g["rules"]}
    assert {"namespace:container_cpu_usage_seconds_total:sum_rate", "node:node_memory_bytes_total:sum",
            "cluster:pod_abnormal:ratio"} <= records
    assert all(r["expr"] for g in rules["prometheus-k8s-rules"]["spec"]["groups"] for r in g["rules"])
    etcd = find(rendered["etcd_certs_ready"], "PrometheusRule", "prometheus-k8s-etcd-rules")["spec"]["groups"]
    assert etcd[0]["name"] == "etcd.rules" and etcd[0]["rules"][0] == {
        "record": "etcd:up:sum", "expr": 'sum by(cluster) (up{job=~".*etcd.*"} == 1)'}


def rule_groups(objects: Objects) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "GlobalRuleGroup"}


def test_global_rule_groups(rendered: dict[str, Objects]) -> None:
    groups = rule_groups(rendered["default"])
    assert sorted(groups) == RULE_GROUPS
    alerts: list[str] = []
    for name, group in groups.items():
        assert group["apiVersion"] == "alerting.kubesphere.io/v2beta1"
        meta = group["metadata"]
        assert "namespace" not in meta and meta["labels"] == BUILTIN
        # As shipped, for the console to restore: the group itself, keys sorted, with upstream's namespace.
        assert meta["annotations"][INITIAL] == json.dumps(
            {"apiVersion": group["apiVersion"], "kind": "GlobalRuleGroup", "spec": group["spec"],
             "metadata": {"annotations": {}, "labels": BUILTIN, "name": name, "namespace": NS}},
            sort_keys=True, separators=(",", ":"))
        assert list(group["spec"]) == ["rules"] and group["spec"]["rules"]
        for rule in group["spec"]["rules"]:
            assert rule["expr"].strip() and rule["severity"] in ("critical", "warning", "info"), rule
            assert len(rule["labels"]["rule_id"]) == 32 and rule["annotations"]["summary"], rule
            assert rule["annotations"]["runbook_url"].startswith("https://alert-runbooks.kubesphere.io/runbooks/")
            alerts.append(rule["alert"])
    assert len(alerts) == 112
    assert {"KubePodCrashLooping", "KubeNodeNotReady", "ksApiserverDown", "NodeFilesystemAlmostOutOfSpace",
            "PrometheusNotConnectedToAlertmanagers", "AlertmanagerFailedReload",
            "KubeAPIErrorBudgetBurn"} <= set(alerts)
    down = groups["ks-controller-manager"]["spec"]["rules"]
    assert down == [{"alert": "ksControllerManagerDown", "expr": 'absent(up{job="ks-controller-manager"} == 1)\n',
                     "for": "15m", "severity": "critical", "labels": {"rule_id": "6367d0bcc67cf87eab8fb4e72e2285be"},
                     "annotations": {
                         "description": "ksControllerManager has disappeared from Prometheus target discovery.",
                         "runbook_url": "https://alert-runbooks.kubesphere.io/runbooks/kubesphere/kscontrollermanagerdown",
                         "summary": "Target disappeared from Prometheus target discovery."}}]


def test_etcd_rule_group_only_with_etcd_monitoring(rendered: dict[str, Objects]) -> None:
    for scenario in ("etcd_certs_ready", "etcd_plain"):
        assert sorted(rule_groups(rendered[scenario])) == sorted([*RULE_GROUPS, "etcd"])
    etcd = rule_groups(rendered["etcd_certs_ready"])["etcd"]
    assert etcd["metadata"]["labels"] == BUILTIN and len(etcd["spec"]["rules"]) == 13
    assert etcd["spec"]["rules"][0]["alert"] == "etcdMembersDown"
    # Not scraped yet (client certificates missing): as its recording rules, not rendered.
    assert sorted(rule_groups(rendered["etcd_certs_missing"])) == RULE_GROUPS
    assert rule_groups(rendered["external"]) == {}


def test_live_retention_and_volume_size_are_kept(rendered: dict[str, Objects]) -> None:
    spec = find(rendered["live"], "Prometheus", "k8s")["spec"]
    assert spec["retention"] == "30d"
    assert spec["storage"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "80Gi"


def test_etcd_secret_is_mounted_only_once_it_has_the_certificates(rendered: dict[str, Objects]) -> None:
    missing = rendered["etcd_certs_missing"]
    assert "secrets" not in find(missing, "Prometheus", "k8s")["spec"]
    assert not any(o["metadata"]["name"] in ("etcd", "prometheus-k8s-etcd-rules") for o in missing)

    ready = rendered["etcd_certs_ready"]
    assert find(ready, "Prometheus", "k8s")["spec"]["secrets"] == ["kube-etcd-client-certs"]
    endpoints = find(ready, "Endpoints", "etcd")
    assert endpoints["metadata"]["namespace"] == "kube-system"
    assert endpoints["subsets"] == [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                                     "ports": [{"name": "metrics", "port": 2379, "protocol": "TCP"}]}]
    service = find(ready, "Service", "etcd")
    assert service["metadata"]["namespace"] == "kube-system" and "selector" not in service["spec"]
    monitor = find(ready, "ServiceMonitor", "etcd")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == {
        "caFile": CERTS + "etcd-client-ca.crt", "certFile": CERTS + "etcd-client.crt",
        "keyFile": CERTS + "etcd-client.key"}


def test_etcd_without_tls_needs_no_secret(rendered: dict[str, Objects]) -> None:
    objects = rendered["etcd_plain"]
    assert "secrets" not in find(objects, "Prometheus", "k8s")["spec"]
    assert find(objects, "ServiceMonitor", "etcd")["spec"]["endpoints"] == [
        {"interval": "1m", "port": "metrics", "scheme": "http"}]


def test_external_prometheus_keeps_only_kubesphere_objects(rendered: dict[str, Objects]) -> None:
    kinds = {k[0] for k in keys(rendered["external"])}
    assert kinds == {"CustomResourceDefinition", "Namespace", "ServiceAccount", "DaemonSet", "Service",
                     "ClusterDashboard"}
    assert {k for k in keys(rendered["external"]) if k[0] == "CustomResourceDefinition"} == {
        ("CustomResourceDefinition", "", "dashboards.monitoring.kubesphere.io"),
        ("CustomResourceDefinition", "", "clusterdashboards.monitoring.kubesphere.io")}


def test_every_service_monitor_carries_the_vendor_label(rendered: dict[str, Objects]) -> None:
    for monitor in (o for o in rendered["etcd_certs_ready"] if o["kind"] == "ServiceMonitor"):
        assert monitor["metadata"]["labels"]["app.kubernetes.io/vendor"] == "kubesphere"


def test_endpoint_ip_filters() -> None:
    f = filter_plugins("ks-monitor", "ks_monitor")
    assert f.ks_split(" 10.0.0.1 ,10.0.0.2,, ") == ["10.0.0.1", "10.0.0.2"]
    assert f.ks_split(["10.0.0.1"]) == ["10.0.0.1"]
    assert f.ks_bad_endpoint_ips("10.0.0.1,fd00::1") == []
    assert f.ks_bad_endpoint_ips("localhost, 127.0.0.1, 169.254.0.1, etcd-0, 10.0.0.1") == [
        "localhost", "127.0.0.1", "169.254.0.1", "etcd-0"]
    assert f.ks_gpu_nodes([
        {"metadata": {"name": "gpu-b"}, "status": {"allocatable": {"nvidia.com/gpu": "2", "cpu": "8"}}},
        {"metadata": {"name": "cpu"}, "status": {"allocatable": {"cpu": "8"}}},
        {"metadata": {"name": "gpu-a"}, "status": {"allocatable": {"nvidia.com/gpu": "0"}}},
        {"metadata": {"name": "new"}}]) == ["gpu-a", "gpu-b"]
    assert f.ks_gpu_nodes(None) == []
    assert set(f.FilterModule().filters()) == {"ks_split", "ks_bad_endpoint_ips", "ks_gpu_nodes"}


def test_notification_manager(rendered: dict[str, Objects]) -> None:
    objects = rendered["extras"]
    operator = containers(objects, "Deployment", "notification-manager-operator")
    assert operator["notification-manager-operator"]["image"] == "kubesphere/notification-manager-operator:v2.3.0"
    assert operator["notification-manager-operator"]["args"] == ["--metrics-addr=127.0.0.1:8080",
                                                                  "--enable-leader-election"]
    assert operator["notification-manager-operator"]["ports"] == [
        {"containerPort": 9443, "name": "webhook-server", "protocol": "TCP"}]
    assert operator["kube-rbac-proxy"]["image"] == "kubesphere/kube-rbac-proxy:v0.11.0"
    spec = pod(objects, "Deployment", "notification-manager-operator")
    assert spec["serviceAccountName"] == "notification-manager-sa"
    assert {"name": "cert", "secret": {"defaultMode": 420, "secretName": "notification-manager-webhook-server-cert"}} \
        in spec["volumes"]
    selector = find(objects, "Deployment", "notification-manager-operator")["spec"]["selector"]["matchLabels"]
    assert selector == {"control-plane": "controller-manager"}  # upstream's (immutable)
    for service, port, target in [("notification-manager-webhook", 443, 9443),
                                  ("notification-manager-controller-metrics", 8443, "https")]:
        svc = find(objects, "Service", service)["spec"]
        assert svc["selector"] == selector
        assert (svc["ports"][0]["port"], svc["ports"][0]["targetPort"]) == (port, target)
    nm = find(objects, "NotificationManager", "notification-manager")
    assert nm["apiVersion"] == "notification.kubesphere.io/v2beta2" and "namespace" not in nm["metadata"]
    assert nm["spec"]["replicas"] == 1 and find(rendered["extras_tuned"], "NotificationManager",
                                                "notification-manager")["spec"]["replicas"] == 2
    assert nm["spec"]["image"] == "kubesphere/notification-manager:v2.3.0"
    assert nm["spec"]["sidecars"]["tenant"]["image"] == "kubesphere/notification-tenant-sidecar:v3.2.0"
    assert nm["spec"]["serviceAccountName"] == "notification-manager-sa" and nm["spec"]["portName"] == "webhook"
    assert nm["spec"]["resources"] == {"limits": {"cpu": "500m", "memory": "500Mi"},
                                       "requests": {"cpu": "5m", "memory": "20Mi"}}
    assert nm["spec"]["template"]["text"] == {"name": "notification-manager-template", "namespace": NS}
    assert nm["spec"]["template"]["languagePack"] == [{"name": "zh-cn", "namespace": NS}]
    assert nm["spec"]["defaultSecretNamespace"] == "kubesphere-monitoring-federated"
    template = find(objects, "ConfigMap", "notification-manager-template")["data"]["template"]
    assert template == (ROLE / "files" / "notification-manager" / "template.tmpl").read_text()
    assert '{{ define "nm.default.html" }}' in template and '{{ define "nm.feishu.post" }}' in template
    languages = yaml.safe_load(find(objects, "ConfigMap", "zh-cn")["data"]["zh-cn"])
    assert languages[0]["name"] == "zh-cn" and languages[0]["dictionary"]["alert"] == "告警"
    for name in ("notification-manager-controller", "notification-manager-proxy",
                 "notification-manager-tenant-sidecar"):
        binding = find(objects, "ClusterRoleBinding", name + "-rolebinding")
        assert binding["roleRef"]["name"] == name + "-role"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "notification-manager-sa", "namespace": NS}]


def test_notification_manager_spec_settings(rendered: dict[str, Objects]) -> None:
    objects = rendered["extras_tuned"]
    operator = containers(objects, "Deployment", "notification-manager-operator")
    assert operator["notification-manager-operator"]["resources"] == RESOURCES
    assert operator["kube-rbac-proxy"]["resources"] == {"limits": {"cpu": "50m", "memory": "50Mi"},
                                                        "requests": {"cpu": "7m", "memory": "10Mi"}}
    assert operator["kube-rbac-proxy"]["image"] == "registry.local:5000/kubesphere/kube-rbac-proxy:v0.11.0"
    nm = find(objects, "NotificationManager", "notification-manager")["spec"]
    assert nm["resources"] == {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "5m", "memory": "20Mi"}}
    assert nm["image"] == "registry.local:5000/kubesphere/notification-manager:v2.3.0"
    assert nm["sidecars"]["tenant"]["image"] == "registry.local:5000/kubesphere/notification-tenant-sidecar:v3.2.0"
    wanted = {"nodeSelector": {"monitoring": "yes"}, "tolerations": TOLERATE_ALL, "affinity": ZONE_AFFINITY}
    assert {k: nm[k] for k in wanted} == wanted
    assert {k: pod(objects, "Deployment", "notification-manager-operator")[k] for k in wanted} == wanted


def test_notification_manager_webhooks_carry_the_generated_ca(rendered: dict[str, Objects]) -> None:
    objects = rendered["extras"]
    webhook = find(objects, "ValidatingWebhookConfiguration", "notification-manager-validating-webhook")
    assert [w["name"] for w in webhook["webhooks"]] == [f"v{k}.notification.kubesphere.io"
                                                        for k in ("config", "receiver", "router", "silence")]
    for hook, kind in zip(webhook["webhooks"], ("config", "receiver", "router", "silence"), strict=True):
        assert hook["clientConfig"] == {"caBundle": CA, "service": {
            "name": "notification-manager-webhook", "namespace": NS,
            "path": f"/validate-notification-kubesphere-io-v2beta2-{kind}"}}
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
        assert hook["rules"] == [{"apiGroups": ["notification.kubesphere.io"], "apiVersions": ["v2beta2"],
                                  "operations": ["CREATE", "UPDATE"], "resources": [kind + "s"]}]
    crds = {o["metadata"]["name"]: o for o in objects if o["kind"] == "CustomResourceDefinition"
            and o["metadata"]["name"] in NM_CRDS}
    assert set(crds) == NM_CRDS
    for name, crd in crds.items():
        spec = crd["spec"]
        assert spec["scope"] == "Cluster" and spec["names"]["categories"] == ["notification-manager"]
        assert [v["name"] for v in spec["versions"] if v["storage"]] == ["v2beta2"]
        assert all(v["served"] and v["subresources"] == {"status": {}} for v in spec["versions"])
        if name.split(".")[0] in ("configs", "receivers"):  # v2beta1 objects are converted by the operator
            assert [v["name"] for v in spec["versions"]] == ["v2beta1", "v2beta2"]
            assert spec["conversion"] == {"strategy": "Webhook", "webhook": {
                "clientConfig": {"caBundle": CA, "service": {"name": "notification-manager-webhook",
                                                             "namespace": NS, "path": "/convert"}},
                "conversionReviewVersions": ["v1", "v1beta1"]}}
        else:
            assert "conversion" not in spec
    assert crds["notificationmanagers.notification.kubesphere.io"]["spec"]["names"]["shortNames"] == ["nm"]


def test_grafana(rendered: dict[str, Objects]) -> None:
    assert not any(o["metadata"]["name"].startswith("grafana") for o in rendered["default"])
    objects = rendered["extras"]
    deployment = find(objects, "Deployment", "grafana")
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["image"] == "grafana/grafana:8.3.3"
    assert container["readinessProbe"] == {"httpGet": {"path": "/api/health", "port": "http"}}
    assert container["resources"] == {"limits": {"cpu": "200m", "memory": "200Mi"},
                                      "requests": {"cpu": "100m", "memory": "100Mi"}}
    assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65534}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod(rendered["extras_tuned"], "Deployment", "grafana")["nodeSelector"] == {"monitoring": "yes"}
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/component": "grafana", "app.kubernetes.io/name": "grafana",
        "app.kubernetes.io/part-of": "kube-prometheus"}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["grafana-storage"] == "/var/lib/grafana"
    for name in GRAFANA_DASHBOARDS:
        assert mounts[f"grafana-dashboard-{name}"] == f"/grafana-dashboard-definitions/0/{name}"
        dashboard = json.loads(find(objects, "ConfigMap", f"grafana-dashboard-{name}")["data"][f"{name}.json"])
        assert dashboard.get("panels") or dashboard.get("rows"), name
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert set(volumes) == set(mounts)
    for volume in volumes.values():  # every volume is an object this role renders
        if "configMap" in volume:
            find(objects, "ConfigMap", volume["configMap"]["name"])
        elif "secret" in volume:
            find(objects, "Secret", volume["secret"]["secretName"])
        else:
            find(objects, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    claim = find(objects, "PersistentVolumeClaim", "grafana-storage")["spec"]
    assert claim == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Mi"}}}
    sources = json.loads(base64.b64decode(find(objects, "Secret", "grafana-datasources")["data"]["datasources.yaml"]))
    assert sources["datasources"][0]["url"] == f"http://prometheus-k8s.{NS}.svc:9090"
    providers = json.loads(find(objects, "ConfigMap", "grafana-dashboards")["data"]["dashboards.yaml"])["providers"]
    assert providers[0]["options"] == {"path": "/grafana-dashboard-definitions/0"}
    assert base64.b64decode(find(objects, "Secret", "grafana-config")["data"]["grafana.ini"])
    service = find(objects, "Service", "grafana")["spec"]
    assert service["ports"] == [{"name": "http", "port": 3000, "targetPort": "http"}]
    assert service["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert find(objects, "ServiceMonitor", "grafana")["spec"]["endpoints"] == [{"interval": "1m", "port": "http"}]
    assert find(rendered["extras_tuned"], "Deployment", "grafana")["spec"]["template"]["spec"]["containers"][0][
        "image"] == "registry.local:5000/grafana/grafana:8.3.3"


def test_gpu_exporter(rendered: dict[str, Objects]) -> None:
    objects = rendered["extras"]
    daemonset = find(objects, "DaemonSet", "gpu-dcgm-exporter")
    spec = daemonset["spec"]["template"]["spec"]
    exporter = spec["containers"][0]
    assert exporter["image"] == "nvcr.io/nvidia/k8s/dcgm-exporter:2.1.8-2.4.0-rc.3-ubuntu18.04"
    assert exporter["args"] == ["-f", "/etc/dcgm-exporter/dcp-metrics-included.csv"]
    assert exporter["securityContext"] == {"runAsNonRoot": False, "runAsUser": 0,
                                           "capabilities": {"add": ["SYS_ADMIN"]}}
    assert exporter["resources"] == {"limits": {"cpu": "100m", "memory": "128Mi"},
                                     "requests": {"cpu": "100m", "memory": "128Mi"}}
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "Exists"}]}]}
    assert spec["serviceAccountName"] == "gpu-dcgm-exporter"
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert daemonset["spec"]["selector"]["matchLabels"] == labels
    service = find(objects, "Service", "gpu-dcgm-exporter")["spec"]
    assert service["selector"].items() <= labels.items() and service["ports"][0]["port"] == 9400
    monitor = find(objects, "ServiceMonitor", "gpu-dcgm-exporter")["spec"]
    assert monitor["selector"]["matchLabels"].items() <= find(objects, "Service", "gpu-dcgm-exporter")["metadata"][
        "labels"].items()
    assert monitor["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s"}]
    dashboard = find(objects, "ClusterDashboard", "nvidia-dcgm-exporter-clusterdashboard-rev1")
    assert dashboard["apiVersion"] == "monitoring.kubesphere.io/v1alpha2"
    assert any(t["expr"] == "DCGM_FI_DEV_GPU_TEMP" for p in dashboard["spec"]["panels"] for t in p.get("targets", []))
    tuned = find(rendered["extras_tuned"], "DaemonSet", "gpu-dcgm-exporter")["spec"]["template"]["spec"]
    assert tuned["containers"][0]["resources"] == RESOURCES
    assert tuned["containers"][0]["image"] == \
        "registry.local:5000/nvidia/k8s/dcgm-exporter:2.1.8-2.4.0-rc.3-ubuntu18.04"
    assert "nodeSelector" not in tuned and "tolerations" not in tuned  # upstream's: only the GPU nodes' label


def test_istio_monitors(rendered: dict[str, Objects]) -> None:
    objects = rendered["extras"]
    namespace = find(objects, "Namespace", "istio-system")["metadata"]["labels"]
    assert namespace == {"kubesphere.io/workspace": "system-workspace", "kubesphere.io/namespace": "istio-system"}
    pods = find(objects, "PodMonitor", "envoy-stats-monitor")
    assert pods["metadata"]["namespace"] == "istio-system"
    endpoint = pods["spec"]["podMetricsEndpoints"][0]
    assert endpoint["path"] == "/stats/prometheus" and endpoint["interval"] == "15s"
    assert endpoint["relabelings"][2]["regex"] == r"([^:]+)(?::\d+)?;(\d+)"
    assert "istio_requests_total" in endpoint["metricRelabelings"][0]["regex"]
    components = find(objects, "ServiceMonitor", "istio-component-monitor")
    assert components["metadata"]["namespace"] == "istio-system"
    assert components["spec"]["selector"] == {"matchExpressions": [{"key": "istio", "operator": "In",
                                                                    "values": ["pilot"]}]}
    assert components["spec"]["endpoints"] == [{"port": "http-monitoring", "interval": "15s"}]
