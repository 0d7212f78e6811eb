"""The alerting module through the engine on the simulated cluster: install (ThanosRuler kubesphere and its
companions, GlobalRuleGroup thanos-rule, status and kubesphere-config), a replicas change that re-runs alerting alone
and migrates a v1beta1 custom rule fixture (and relabels a legacy Thanos Ruler rule), which ``plan --objects`` lists
object by object first, uninstall (the module's objects and status gone, the migrated rule groups kept), re-enable
(nothing migrated twice).

prometheus-operator does not run here (kwok only simulates kubelets), so the ThanosRuler is checked as an object;
its StatefulSet is the operator's and nothing waits for it (upstream did not either)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-monitoring-system"
MON = ("monitoring.coreos.com", "v1")
ALERTING = ("alerting.kubesphere.io", "v2beta1")
MIGRATED = "migrated-to-alerting-v2beta1"
NODE_RULE = {"alert": "test-node-cpu-high", "expr": 'node:node_cpu_utilisation:avg1m{node=~"ks-sim-worker-1"} > 0.7',
             "for": "5m", "labels": {"severity": "warning", "alerttype": "metric", "rule_id": "abc"},
             "annotations": {"kind": "Node", "resources": '["ks-sim-worker-1"]', "summary": "CPU high",
                             "rules": '[{"_metricType":"node:node_cpu_utilisation:avg1m{$1}","condition_type":">",'
                                      '"thresholds":"70","unit":"%"}]'}}
WORKLOAD_RULE = {"alert": "test-web-memory", "expr": "namespace:workload_memory_usage:sum > 1", "labels": {},
                 "annotations": {"kind": "Deployment", "resources": '["web"]', "rules":
                                 '[{"_metricType":"namespace:workload_memory_usage:sum{$1}","condition_type":">",'
                                 '"thresholds":"2","unit":"Mi"}]'}}


def prometheus_rule(name: str, namespace: str, labels: dict[str, str], *rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"groups": [{"name": "custom", "rules": list(rules)}]}}


FIXTURES = [
    prometheus_rule("test-legacy-thanos", "default", {"thanosruler": "thanos-ruler", "role": "thanos-alerting-rules"},
                    {"alert": "Legacy", "expr": "up == 0"}),
    prometheus_rule("test-custom-cluster", NS, {"custom-alerting-rule-level": "cluster"}, NODE_RULE),
    prometheus_rule("test-custom-namespace", "default", {"custom-alerting-rule-level": "namespace"}, WORKLOAD_RULE),
]


def get(installer: Installer, group: tuple[str, str], plural: str, name: str, namespace: str | None = NS) -> Any:
    """The object as a dict, or None."""
    try:
        if namespace is None:
            return installer.custom.get_cluster_custom_object(*group, plural, name)
        return installer.custom.get_namespaced_custom_object(*group, namespace, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def alerting_config(installer: Installer) -> Any:
    cm = client.CoreV1Api(installer.api).read_namespaced_config_map("kubesphere-config", "kubesphere-system")
    return yaml.safe_load(cm.data["kubesphere.yaml"]).get("alerting")


def assert_installed(installer: Installer, replicas: int) -> None:
    ruler = get(installer, MON, "thanosrulers", "kubesphere")
    assert ruler["spec"]["replicas"] == replicas
    assert ruler["spec"]["image"] == "thanosio/thanos:v0.31.0"
    assert ruler["spec"]["queryEndpoints"] == ["http://prometheus-operated.kubesphere-monitoring-system.svc:9090"]
    assert get(installer, MON, "servicemonitors", "thanos-ruler-kubesphere")
    assert get(installer, MON, "prometheusrules", "thanos-ruler-kubesphere-rules")
    assert len(get(installer, ALERTING, "globalrulegroups", "thanos-rule", None)["spec"]["rules"]) == 11
    client.CoreV1Api(installer.api).read_namespaced_service("thanos-ruler-kubesphere", NS)
    client.PolicyV1Api(installer.api).read_namespaced_pod_disruption_budget("thanos-ruler-kubesphere", NS)
    status = installer.status()
    assert status["alerting"]["status"] == "enabled" and status["alerting"]["enabledTime"]
    assert alerting_config(installer)["thanosRulerEndpoint"].startswith("http://thanos-ruler-operated.")


def labels(installer: Installer, name: str, namespace: str) -> dict[str, str]:
    return get(installer, MON, "prometheusrules", name, namespace)["metadata"]["labels"]


def cleanup(installer: Installer) -> None:
    for rule in FIXTURES:
        with contextlib.suppress(ApiException):
            installer.custom.delete_namespaced_custom_object(*MON, rule["metadata"]["namespace"], "prometheusrules",
                                                             rule["metadata"]["name"])
    with contextlib.suppress(ApiException):
        installer.custom.delete_cluster_custom_object(*ALERTING, "clusterrulegroups", NODE_RULE["alert"])
    with contextlib.suppress(ApiException):
        installer.custom.delete_namespaced_custom_object(*ALERTING, "default", "rulegroups", WORKLOAD_RULE["alert"])


def test_alerting_install_change_migrate_uninstall_and_reenable(installer: Installer) -> None:
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    cleanup(installer)
    installer.apply_cc(alerting={"enabled": True})
    assert "alerting" in installer.reconcile_ok()
    nodes = len(client.CoreV1Api(installer.api).list_node().items)
    assert_installed(installer, 1 if nodes < 3 else 2)

    try:
        # Rules of older KubeSphere releases, then a replicas change: alerting alone re-runs, and migrates them.
        for rule in FIXTURES:
            installer.custom.create_namespaced_custom_object(*MON, rule["metadata"]["namespace"], "prometheusrules",
                                                             rule)
        installer.apply_cc(alerting={"enabled": True, "thanosruler": {"replicas": 3}})
        # Previewed first: the rules relabelled and labelled migrated, the groups created (reads only).
        proc = installer.cli("plan", "--objects", "-o", "json")
        assert proc.returncode == 1, proc.stderr[-3000:]
        (module,) = [m for m in json.loads(proc.stdout)["modules"] if m["module"] == "alerting"]
        planned = {o["object"]: (o["action"], o["fields"]) for o in module["objects"]
                   if not o["object"].startswith(("ThanosRuler/", "GlobalRuleGroup/")) and o["action"] != "unchanged"}
        migrated = ['metadata.labels.migrated-to-alerting-v2beta1: + "true"']
        assert planned == {
            "PrometheusRule/default/test-legacy-thanos": ("update", [
                'metadata.labels.thanos-ruler: + "kubesphere"',
                'metadata.labels.role: "thanos-alerting-rules" -> "alert-rules"',
                'metadata.labels.thanosruler: - "thanos-ruler"']),
            f"ClusterRuleGroup/{NODE_RULE['alert']}": ("create", []),
            f"PrometheusRule/{NS}/test-custom-cluster": ("update", migrated),
            f"RuleGroup/default/{WORKLOAD_RULE['alert']}": ("create", []),
            "PrometheusRule/default/test-custom-namespace": ("update", migrated)}, planned
        assert get(installer, ALERTING, "clusterrulegroups", NODE_RULE["alert"], None) is None
        assert MIGRATED not in labels(installer, "test-custom-cluster", NS)
        assert "thanosruler" in labels(installer, "test-legacy-thanos", "default")
        assert installer.reconcile_ok() == ["alerting"]
        assert get(installer, MON, "thanosrulers", "kubesphere")["spec"]["replicas"] == 3
        assert labels(installer, "test-legacy-thanos", "default") == {"thanos-ruler": "kubesphere",
                                                                      "role": "alert-rules"}
        cluster_group = get(installer, ALERTING, "clusterrulegroups", NODE_RULE["alert"], None)
        (rule,) = cluster_group["spec"]["rules"]
        assert rule["severity"] == "warning" and rule["exprBuilder"]["node"] == {
            "names": ["ks-sim-worker-1"], "comparator": ">", "metricThreshold": {"cpu": {"utilization": 0.7}}}
        assert "installer.kubesphere.io/module" not in cluster_group["metadata"]["labels"]
        group = get(installer, ALERTING, "rulegroups", WORKLOAD_RULE["alert"], "default")
        assert group["spec"]["rules"][0]["exprBuilder"]["workload"]["metricThreshold"] == {
            "memory": {"usage": 2 * 1024 * 1024}}
        assert labels(installer, "test-custom-cluster", NS)[MIGRATED] == "true"
        assert labels(installer, "test-custom-namespace", "default")[MIGRATED] == "true"

        installer.apply_cc(alerting={"enabled": False, "thanosruler": {"replicas": 3}})
        assert installer.reconcile_ok() == ["alerting", "ks-config"]
        assert installer.leftovers("alerting") == set()
        assert not installer.module_objects().get("alerting")
        assert get(installer, MON, "thanosrulers", "kubesphere") is None
        assert "alerting" not in installer.status() and alerting_config(installer) is None
        # The user's rules stay: the migrated groups, and the relabelled rule with its new labels.
        assert get(installer, ALERTING, "rulegroups", WORKLOAD_RULE["alert"], "default")
        assert labels(installer, "test-legacy-thanos", "default")["thanos-ruler"] == "kubesphere"

        # Re-enable: back, and a migrated rule is not migrated again (its group, deleted by the user, stays gone).
        installer.custom.delete_cluster_custom_object(*ALERTING, "clusterrulegroups", NODE_RULE["alert"])
        installer.apply_cc(alerting={"enabled": True})
        assert installer.reconcile_ok() == ["alerting", "ks-config"]
        assert_installed(installer, 1 if nodes < 3 else 2)
        assert get(installer, ALERTING, "clusterrulegroups", NODE_RULE["alert"], None) is None
    finally:
        cleanup(installer)
