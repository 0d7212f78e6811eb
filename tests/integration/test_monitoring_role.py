"""The monitoring module (role ks-monitor) against the simulated cluster.

The prometheus-operator and notification-manager-operator images do not run here (kwok only simulates kubelets),
so Prometheus, Alertmanager and the NotificationManager are checked as objects, never for pods.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from installer.settings import MODULE_LABEL

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-monitoring-system"
SECRET = "kube-etcd-client-certs"
ETCD = {"etcd__monitoring": True, "etcd__endpointIps": "192.168.0.11, 192.168.0.12"}
PVC = "prometheus-k8s-db-prometheus-k8s-0"
MON = "monitoring.coreos.com/v1"
ALERTING = "alerting.kubesphere.io/v2beta1"
RBAC = "rbac.authorization.k8s.io/v1"
NM_WEBHOOK = "notification-manager-validating-webhook"
NM_CERT = "notification-manager-webhook-server-cert"
GRAFANA_CLAIM = "grafana-storage"
# Objects ks-installer v3.4.1 created that the stack gained after its first version (upstream-inventory
# monitoring.json, tag v3.4.1): (apiVersion, kind, name, namespace).
UPSTREAM_OBJECTS = [
    ("policy/v1", "PodDisruptionBudget", "prometheus-k8s", NS),
    ("policy/v1", "PodDisruptionBudget", "alertmanager-main", NS),
    (RBAC, "Role", "prometheus-k8s-config", NS),
    (RBAC, "RoleBinding", "prometheus-k8s-config", NS),
    ("v1", "Service", "kube-controller-manager-svc", "kube-system"),
    ("v1", "Service", "kube-scheduler-svc", "kube-system"),
    *((MON, "ServiceMonitor", name, NS) for name in ("kube-controller-manager", "kube-scheduler", "coredns",
                                                     "kubelet", "kube-apiserver", "ks-apiserver",
                                                     "ks-controller-manager", "node-exporter", "kube-state-metrics")),
    *((MON, "PrometheusRule", name, NS) for name in (
        "prometheus-k8s-rules", "prometheus-k8s-prometheus-rules", "alertmanager-main-rules",
        "prometheus-operator-rules", "node-exporter-rules", "kube-state-metrics-rules")),
]



@pytest.fixture
def mon(installer: Installer) -> Iterator[Installer]:
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"  # the console is ks-core's business, not this module's
    yield installer
    with contextlib.suppress(ApiException):
        client.CoreV1Api(installer.api).delete_namespaced_secret(SECRET, NS)


def get(api: client.ApiClient, api_version: str, kind: str, name: str, namespace: str | None = NS) -> Any:
    """The live object as a dict, or None."""
    try:
        res = DynamicClient(api).resources.get(api_version=api_version, kind=kind)
        return res.get(name=name, namespace=namespace).to_dict()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def reconcile_ok(installer: Installer) -> list[str]:
    ran = installer.reconcile_ok()
    assert installer.status()["modules"]["monitoring"]["phase"] == "Installed"
    return ran


def prometheus_secrets(installer: Installer) -> list[str] | None:
    return get(installer.api, "monitoring.coreos.com/v1", "Prometheus", "k8s")["spec"].get("secrets")


def rule_groups(api: client.ApiClient) -> dict[str, Any]:
    """The GlobalRuleGroups this module applied, by name."""
    items = DynamicClient(api).resources.get(api_version=ALERTING, kind="GlobalRuleGroup").get(
        label_selector=f"{MODULE_LABEL}=monitoring").to_dict()["items"]
    return {i["metadata"]["name"]: i for i in items}


def test_monitoring_installs_the_prometheus_stack(mon: Installer) -> None:
    # The default cc installed monitoring (the platform fixture's install, or an earlier test's, restored).
    mon.apply_cc()
    reconcile_ok(mon)
    assert mon.status()["monitoring"]["status"] == "enabled"
    apps = client.AppsV1Api(mon.api)
    for name in ("prometheus-operator", "kube-state-metrics"):  # waited for: Available
        assert apps.read_namespaced_deployment(name, NS).status.available_replicas == 1
    node_exporter = apps.read_namespaced_daemon_set("node-exporter", NS)
    assert node_exporter.spec.template.spec.containers[1].ports[0].host_port == 9100
    operator = apps.read_namespaced_deployment("prometheus-operator", NS).spec.template.spec.containers[0]
    assert operator.resources.limits == {"cpu": "200m", "memory": "200Mi"}
    prometheus = get(mon.api, "monitoring.coreos.com/v1", "Prometheus", "k8s")
    assert prometheus["spec"]["replicas"] == 2  # three simulated nodes
    assert prometheus["spec"]["retention"] == "7d"
    assert prometheus["spec"]["serviceMonitorSelector"] == {}
    assert "secrets" not in prometheus["spec"]
    assert prometheus["metadata"]["labels"][MODULE_LABEL] == "monitoring"
    assert get(mon.api, "monitoring.coreos.com/v1", "Alertmanager", "main")["spec"]["replicas"] == 3
    for api_version, kind, name, namespace in UPSTREAM_OBJECTS:
        assert get(mon.api, api_version, kind, name, namespace), f"{kind} {namespace}/{name}"
    ports = get(mon.api, "v1", "Service", "prometheus-k8s")["spec"]["ports"]
    assert [p["name"] for p in ports] == ["web", "reloader-web"]
    assert get(mon.api, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "thanosrulers.monitoring.coreos.com",
               None)
    groups = rule_groups(mon.api)
    assert len(groups) == 17 and "etcd" not in groups, sorted(groups)
    assert groups["kubernetes-apps"]["metadata"]["labels"]["alerting.kubesphere.io/builtin"] == "true"
    assert groups["kubernetes-apps"]["spec"]["rules"][0]["alert"] == "KubePodCrashLooping"
    assert_notification_manager(mon)
    assert get(mon.api, "apps/v1", "Deployment", "grafana") is None  # monitoring.grafana.enabled is off
    # Nothing changed: nothing runs.
    assert mon.ran(mon.reconcile()) == []

    # Grafana turned on later, then off again: gone but for its volume.
    ca = client.CoreV1Api(mon.api).read_namespaced_secret(NM_CERT, NS).data["ca.crt"]
    try:
        mon.apply_cc(monitoring__grafana={"enabled": True})
        assert reconcile_ok(mon) == ["monitoring"]
        grafana = client.AppsV1Api(mon.api).read_namespaced_deployment("grafana", NS)
        assert grafana.status.available_replicas == 1
        assert grafana.spec.template.spec.containers[0].image == "grafana/grafana:8.3.3"
        dashboards = client.CoreV1Api(mon.api).list_namespaced_config_map(
            NS, label_selector="app.kubernetes.io/name=grafana").items
        assert len([c for c in dashboards if c.metadata.name.startswith("grafana-dashboard-")]) == 23
        for kind, name in [("Secret", "grafana-config"), ("Secret", "grafana-datasources"), ("Service", "grafana"),
                           ("ServiceAccount", "grafana"), ("PersistentVolumeClaim", GRAFANA_CLAIM)]:
            assert get(mon.api, "v1", kind, name), name
        assert get(mon.api, MON, "ServiceMonitor", "grafana")
        # The webhook certificate is kept across runs (no prune of the Secrets removed it).
        assert client.CoreV1Api(mon.api).read_namespaced_secret(NM_CERT, NS).data["ca.crt"] == ca

        mon.apply_cc(monitoring__grafana={"enabled": False})
        assert reconcile_ok(mon) == ["monitoring"]
        assert get(mon.api, "apps/v1", "Deployment", "grafana") is None
        for kind, name in [("Secret", "grafana-config"), ("Service", "grafana"), ("ConfigMap", "grafana-dashboards"),
                           ("ConfigMap", "grafana-dashboard-nodes")]:
            assert get(mon.api, "v1", kind, name) is None, name
        assert get(mon.api, MON, "ServiceMonitor", "grafana") is None
        assert get(mon.api, "v1", "PersistentVolumeClaim", GRAFANA_CLAIM)  # the dashboards users saved
        assert_notification_manager(mon)
    finally:
        with contextlib.suppress(ApiException):
            client.CoreV1Api(mon.api).delete_namespaced_persistent_volume_claim(GRAFANA_CLAIM, NS)


def assert_notification_manager(mon: Installer) -> None:
    """The operator Available, its webhook registered with the CA of the generated certificate, which the
    conversion webhook of the configs and receivers CRDs carries too; the NotificationManager and its templates."""
    operator = client.AppsV1Api(mon.api).read_namespaced_deployment("notification-manager-operator", NS)
    assert operator.status.available_replicas == 1
    cert = client.CoreV1Api(mon.api).read_namespaced_secret(NM_CERT, NS)
    assert cert.type == "kubernetes.io/tls" and {"tls.crt", "tls.key"} <= set(cert.data)
    webhook = get(mon.api, "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", NM_WEBHOOK, None)
    assert {w["clientConfig"]["caBundle"] for w in webhook["webhooks"]} == {cert.data["ca.crt"]}
    for plural in ("configs", "receivers"):
        crd = get(mon.api, "apiextensions.k8s.io/v1", "CustomResourceDefinition",
                  f"{plural}.notification.kubesphere.io", None)
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == cert.data["ca.crt"]
    nm = get(mon.api, "notification.kubesphere.io/v2beta2", "NotificationManager", "notification-manager", None)
    assert nm["spec"]["replicas"] == 2  # three simulated nodes
    assert nm["metadata"]["labels"][MODULE_LABEL] == "monitoring"
    for name in ("notification-manager-template", "zh-cn"):
        assert get(mon.api, "v1", "ConfigMap", name)


def test_spec_settings_apply_and_hand_set_retention_and_volume_size_stay(mon: Installer) -> None:
    mon.apply_cc()
    reconcile_ok(mon)
    custom = client.CustomObjectsApi(mon.api)
    core = client.CoreV1Api(mon.api)
    # Set by hand, as upstream's users did: a longer retention, and a volume grown to 80Gi.
    custom.patch_namespaced_custom_object("monitoring.coreos.com", "v1", NS, "prometheuses", "k8s",
                                          {"spec": {"retention": "30d"}})
    core.create_namespaced_persistent_volume_claim(NS, {
        "metadata": {"name": PVC},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "80Gi"}}}})
    try:
        tolerations = [{"key": "monitoring", "operator": "Exists", "effect": "NoSchedule"}]
        mon.apply_cc(monitoring__prometheus={"resources": {"limits": {"memory": "20Gi"}}, "volumeSize": "40Gi"},
                     monitoring__alertmanager={"replicas": 2}, monitoring__tolerations=tolerations,
                     monitoring__kube_rbac_proxy={"resources": {"requests": {"cpu": "15m"}}})
        assert reconcile_ok(mon) == ["monitoring"]
        spec = get(mon.api, "monitoring.coreos.com/v1", "Prometheus", "k8s")["spec"]
        assert spec["resources"] == {"limits": {"cpu": "4", "memory": "20Gi"},
                                     "requests": {"cpu": "200m", "memory": "400Mi"}}
        assert spec["tolerations"] == tolerations
        assert spec["retention"] == "30d"
        assert spec["storage"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "80Gi"
        assert get(mon.api, "monitoring.coreos.com/v1", "Alertmanager", "main")["spec"]["replicas"] == 2
        ksm = client.AppsV1Api(mon.api).read_namespaced_deployment("kube-state-metrics", NS).spec.template.spec
        assert [t.key for t in ksm.tolerations] == ["monitoring"]
        assert {c.name: c.resources.requests["cpu"] for c in ksm.containers} == {
            "kube-state-metrics": "100m", "kube-rbac-proxy-main": "15m", "kube-rbac-proxy-self": "15m"}
    finally:
        core.delete_namespaced_persistent_volume_claim(PVC, NS)
        custom.patch_namespaced_custom_object("monitoring.coreos.com", "v1", NS, "prometheuses", "k8s",
                                              {"spec": {"retention": "7d"}})


def test_etcd_monitoring_turned_on_later_waits_for_the_secret_then_mounts_it(mon: Installer) -> None:
    mon.apply_cc()
    reconcile_ok(mon)

    # The default endpointIps (localhost) cannot go into an Endpoints object.
    mon.apply_cc(etcd__monitoring=True)
    proc = mon.reconcile()
    assert mon.ran(proc) == ["monitoring"]
    module = mon.status()["modules"]["monitoring"]
    assert module["phase"] == "Failed" and "etcd.endpointIps" in module["message"] and "localhost" in module["message"]

    # Real IPs, but no client certificates yet: the rest is applied, Prometheus does not mount the Secret.
    mon.apply_cc(**ETCD)
    proc = mon.reconcile()
    assert mon.ran(proc) == ["monitoring"]
    module = mon.status()["modules"]["monitoring"]
    assert module["phase"] == "Failed"
    assert SECRET in module["failedTask"]
    assert (f"kubectl -n {NS} create secret generic {SECRET} --from-file=etcd-client-ca.crt="
            in " ".join(module["message"].split()))
    assert prometheus_secrets(mon) is None
    assert get(mon.api, "monitoring.coreos.com/v1", "ServiceMonitor", "etcd") is None

    # The user creates the Secret; the retry (no spec change) mounts it and adds the etcd scrape objects.
    data = {k: base64.b64encode(b"pem").decode() for k in ("etcd-client-ca.crt", "etcd-client.crt", "etcd-client.key")}
    client.CoreV1Api(mon.api).create_namespaced_secret(NS, {"metadata": {"name": SECRET}, "data": data})
    assert mon.ran(mon.reconcile()) == ["monitoring"]
    assert mon.status()["modules"]["monitoring"]["phase"] == "Installed"
    assert prometheus_secrets(mon) == [SECRET]
    monitor = get(mon.api, "monitoring.coreos.com/v1", "ServiceMonitor", "etcd")
    tls = monitor["spec"]["endpoints"][0]["tlsConfig"]
    assert tls["certFile"] == f"/etc/prometheus/secrets/{SECRET}/etcd-client.crt"
    endpoints = get(mon.api, "v1", "Endpoints", "etcd", "kube-system")
    assert [a["ip"] for a in endpoints["subsets"][0]["addresses"]] == ["192.168.0.11", "192.168.0.12"]
    assert endpoints["subsets"][0]["ports"][0]["port"] == 2379
    assert get(mon.api, "v1", "Service", "etcd", "kube-system")
    assert get(mon.api, MON, "PrometheusRule", "prometheus-k8s-etcd-rules")
    assert "etcd" in rule_groups(mon.api)

    # Off again: the etcd objects and the mount go; the user's Secret and the controller's Endpoints stay.
    mon.apply_cc()
    assert reconcile_ok(mon) == ["monitoring"]
    assert prometheus_secrets(mon) is None
    assert get(mon.api, "v1", "Endpoints", "etcd", "kube-system") is None
    assert get(mon.api, "v1", "Service", "etcd", "kube-system") is None
    assert get(mon.api, "monitoring.coreos.com/v1", "ServiceMonitor", "etcd") is None
    assert get(mon.api, MON, "PrometheusRule", "prometheus-k8s-etcd-rules") is None
    assert "etcd" not in rule_groups(mon.api) and len(rule_groups(mon.api)) == 17
    assert get(mon.api, "v1", "Secret", SECRET)
    assert get(mon.api, "v1", "Endpoints", "kube-state-metrics")


def test_external_prometheus_removes_the_stack_but_keeps_crds(mon: Installer) -> None:
    mon.apply_cc()
    reconcile_ok(mon)
    mon.apply_cc(common__monitoring__type="external")
    assert "monitoring" in reconcile_ok(mon)
    assert get(mon.api, "apps/v1", "Deployment", "prometheus-operator") is None
    assert get(mon.api, "apps/v1", "DaemonSet", "node-exporter") is None
    assert get(mon.api, "rbac.authorization.k8s.io/v1", "ClusterRole", "kubesphere-prometheus-k8s", None) is None
    assert get(mon.api, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "prometheuses.monitoring.coreos.com",
               None)
    assert get(mon.api, "monitoring.coreos.com/v1", "Prometheus", "k8s") is None
    assert get(mon.api, "v1", "Service", "kube-scheduler-svc", "kube-system") is None
    assert get(mon.api, "v1", "Namespace", NS, None)
    assert rule_groups(mon.api) == {}
    # notification-manager goes with the stack, its webhook included; its CRDs stay.
    assert get(mon.api, "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", NM_WEBHOOK, None) is None
    assert get(mon.api, "apps/v1", "Deployment", "notification-manager-operator") is None
    assert get(mon.api, "v1", "Secret", NM_CERT) is None
    assert get(mon.api, "notification.kubesphere.io/v2beta2", "NotificationManager", "notification-manager",
               None) is None
    assert get(mon.api, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "receivers.notification.kubesphere.io",
               None)

    mon.apply_cc()
    reconcile_ok(mon)
    assert get(mon.api, "monitoring.coreos.com/v1", "Prometheus", "k8s")
    assert len(rule_groups(mon.api)) == 17
    assert_notification_manager(mon)
