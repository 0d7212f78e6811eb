"""The alerting role's manifests, rendered by Ansible for spec variants (no cluster), and ks_alert_rules' relabelling
and v1beta1 → v2beta1 rule migration against a fake cluster."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from installer_state import upstream_objects
from role_harness import Objects, engine_vars, find, keys, render_scenarios

from installer.ansible_tasks import ks_alert_rules
from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
NS = "kubesphere-monitoring-system"
ON = {"alerting": {"enabled": True}}
SELECTOR = {"app.kubernetes.io/component": "thanos-ruler", "app.kubernetes.io/instance": "kubesphere",
            "app.kubernetes.io/name": "thanos-ruler", "app.kubernetes.io/part-of": "kube-prometheus"}
ZONE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": (ON, {"nodeNum": 1}),
    "nodes3": (ON, {"nodeNum": 3}),
    "replicas": ({"alerting": {"enabled": True, "thanosruler": {
        "replicas": 3, "resources": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "200m"}}}}}, {"nodeNum": 5}),
    "monitoring_scheduling": ({**ON, "monitoring": {"nodeSelector": {"pool": "monitoring"},
                                                    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                                                    "affinity": ZONE},
                               "nodeSelector": {"pool": "global"}}, {"nodeNum": 1}),
    "global_scheduling": ({**ON, "nodeSelector": {"pool": "global"}, "tolerations": [{"operator": "Exists"}],
                           "affinity": ZONE}, {"nodeNum": 1}),
    "registry": ({**ON, "local_registry": "registry.local:5000"}, {"nodeNum": 1}),
    "external": ({**ON, "common": {"monitoring": {"type": "external", "endpoint": "https://prom.example.com:9090"}}},
                 {"nodeNum": 1, "kubernetes_version": "v1.20.4"}),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: {**apply_defaults(changes), **facts} for name, (changes, facts) in SCENARIOS.items()}
    no_endpoint = apply_defaults(ON)
    del no_endpoint["common"]["monitoring"]["endpoint"]
    scenarios["no_endpoint"] = {**no_endpoint, "nodeNum": 1}
    return render_scenarios("alerting", "ks_alerting_objects", scenarios, tmp_path_factory.mktemp("alerting"),
                            {**engine_vars("alerting"), "kubernetes_version": "v1.34.4"})


def ruler(objects: Objects) -> dict[str, Any]:
    return find(objects, "ThanosRuler", "kubesphere")["spec"]


def test_objects_are_upstreams_in_every_variant(rendered: dict[str, Objects]) -> None:
    for name, objects in rendered.items():
        assert len(objects) == len(keys(objects)) == 6, name
        assert keys(objects) == upstream_objects("alerting"), name
    apis = {o["kind"]: o["apiVersion"] for o in rendered["default"]}
    assert apis == {o["kind"]: o["apiVersion"] for o in json.loads(
        (REPO / "tests" / "parity" / "upstream" / "alerting.json").read_text())["objects"]}
    pdb = find(rendered["external"], "PodDisruptionBudget", "thanos-ruler-kubesphere")
    assert pdb["apiVersion"] == "policy/v1beta1"  # Kubernetes 1.20


def test_thanos_ruler_as_upstream(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    thanos = find(objects, "ThanosRuler", "kubesphere")
    assert thanos["metadata"]["namespace"] == NS
    assert thanos["metadata"]["labels"] == {**SELECTOR, "app.kubernetes.io/version": "0.31.0"}
    spec = thanos["spec"]
    assert spec["image"] == "thanosio/thanos:v0.31.0"
    assert spec["replicas"] == 1
    assert spec["alertmanagersUrl"] == ["dnssrv+http://alertmanager-operated.kubesphere-monitoring-system.svc:9093"]
    assert spec["queryEndpoints"] == ["http://prometheus-operated.kubesphere-monitoring-system.svc:9090"]
    assert spec["evaluationInterval"] == "1m"
    assert spec["ruleSelector"] == {"matchExpressions": [
        {"key": "alerting.kubesphere.io/rule_level", "operator": "In", "values": ["namespace", "cluster", "global"]}]}
    assert spec["podMetadata"]["labels"] == thanos["metadata"]["labels"]
    assert spec["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                                 "requests": {"cpu": "100m", "memory": "100Mi"}}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"} and "tolerations" not in spec
    term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == SELECTOR
    assert term["podAffinityTerm"]["namespaces"] == [NS] and term["weight"] == 100
    no_endpoint = ruler(rendered["no_endpoint"])["queryEndpoints"]
    assert no_endpoint == ["prometheus-operated.kubesphere-monitoring-system.svc:9090"]  # upstream's fallback


def test_companions_as_upstream(rendered: dict[str, Objects]) -> None:
    objects = rendered["default"]
    service = find(objects, "Service", "thanos-ruler-kubesphere")["spec"]
    assert service == {"ports": [{"name": "web", "port": 10902, "targetPort": "web"}], "selector": SELECTOR,
                       "sessionAffinity": "ClientIP"}
    monitor = find(objects, "ServiceMonitor", "thanos-ruler-kubesphere")
    assert monitor["metadata"]["labels"]["app.kubernetes.io/vendor"] == "kubesphere"
    assert monitor["spec"] == {"endpoints": [{"interval": "1m", "port": "web"}], "selector": {"matchLabels": SELECTOR}}
    pdb = find(objects, "PodDisruptionBudget", "thanos-ruler-kubesphere")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": SELECTOR}}
    rule = find(objects, "PrometheusRule", "thanos-ruler-kubesphere-rules")
    assert rule["metadata"]["labels"]["prometheus"] == "k8s" and rule["metadata"]["labels"]["role"] == "alert-rules"
    assert rule["spec"] == {"groups": []}


def test_global_rule_group_is_upstreams(rendered: dict[str, Objects]) -> None:
    group = find(rendered["default"], "GlobalRuleGroup", "thanos-rule")
    assert "namespace" not in group["metadata"]
    assert group["metadata"]["labels"] == {"alerting.kubesphere.io/builtin": "true",
                                           "alerting.kubesphere.io/enable": "true"}
    rules = group["spec"]["rules"]
    assert len(rules) == 11 and rules[0]["alert"] == "ThanosRuleQueueIsDroppingAlerts"
    assert rules[0]["severity"] == "critical" and rules[0]["labels"] == {"rule_id": "8a663511d4642025f5a0580fd618d89b"}
    assert "{{$labels.instance}}" in rules[0]["annotations"]["description"]  # Prometheus' template, not Jinja's
    initial = json.loads(group["metadata"]["annotations"]["alerting.kubesphere.io/initial-configuration"])
    assert initial["spec"] == group["spec"] and initial["metadata"]["namespace"] == NS
    assert initial["metadata"]["name"] == "thanos-rule"


def test_replicas_by_node_count_and_spec(rendered: dict[str, Objects]) -> None:
    assert ruler(rendered["nodes3"])["replicas"] == 2
    spec = ruler(rendered["replicas"])
    assert spec["replicas"] == 3
    assert spec["resources"] == {"limits": {"cpu": "1", "memory": "2Gi"},
                                 "requests": {"cpu": "200m", "memory": "100Mi"}}


def test_scheduling_monitoring_first_then_global(rendered: dict[str, Objects]) -> None:
    spec = ruler(rendered["monitoring_scheduling"])
    assert spec["nodeSelector"] == {"pool": "monitoring"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}] and spec["affinity"] == ZONE
    spec = ruler(rendered["global_scheduling"])
    assert spec["nodeSelector"] == {"pool": "global"}
    assert spec["tolerations"] == [{"operator": "Exists"}] and spec["affinity"] == ZONE


def test_registry_and_external_endpoint(rendered: dict[str, Objects]) -> None:
    assert ruler(rendered["registry"])["image"] == "registry.local:5000/thanosio/thanos:v0.31.0"
    assert ruler(rendered["external"])["queryEndpoints"] == ["https://prom.example.com:9090"]


# ks_alert_rules ---------------------------------------------------------------------------------------------------


def library() -> ModuleType:
    """The task's code, which the ks_alert_rules module and action plugin run."""
    return ks_alert_rules


NODE_RULE = {
    "alert": "node-cpu-high",
    "expr": 'node:node_cpu_utilisation:avg1m{node=~"node1|node2"} > 0.7',
    "for": "5m",
    "labels": {"severity": "warning", "alerttype": "metric", "rule_id": "abc", "team": "ops"},
    "annotations": {"kind": "Node", "resources": '["node1","node2"]', "summary": "CPU high",
                    "rules": '[{"_metricType":"node:node_cpu_utilisation:avg1m{$1}","condition_type":">",'
                             '"thresholds":"70","unit":"%"}]',
                    "rule_update_time": "2021-01-01T00:00:00Z"},
}
WORKLOAD_RULE = {
    "alert": "Memory_Of_Deploy",
    "expr": "x > 1",
    "labels": {"severity": "critical"},
    "annotations": {"kind": "Deployment", "resources": '["web"]',
                    "rules": '[{"_metricType":"namespace:workload_memory_usage:sum{$1}","condition_type":">=",'
                             '"thresholds":2,"unit":"Mi"}]'},
}


def prometheus_rule(name: str, namespace: str, level: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": name, "namespace": namespace, "labels": {"custom-alerting-rule-level": level}},
            "spec": {"groups": [{"name": "alerting.custom.defaults", "rules": list(rules)}]}}


def test_rule_migration_is_upstreams_jq() -> None:
    lib = library()
    node = lib.migrate_rule(NODE_RULE)
    assert node == {
        "alert": "node-cpu-high", "expr": NODE_RULE["expr"], "for": "5m", "severity": "warning",
        "labels": {"team": "ops"}, "annotations": {"summary": "CPU high"},
        "exprBuilder": {"node": {"names": ["node1", "node2"], "comparator": ">",
                                 "metricThreshold": {"cpu": {"utilization": 0.7}}}}}
    workload = lib.migrate_rule(WORKLOAD_RULE)
    assert workload["exprBuilder"] == {"workload": {"names": ["web"], "comparator": ">=", "kind": "Deployment",
                                                    "metricThreshold": {"memory": {"usage": 2 * 1024 * 1024}}}}
    assert workload["labels"] == {} and workload["annotations"] == {}
    # Upstream's "netowrk" typo lost this threshold; an unknown metric keeps the expr only.
    transmitted = {**NODE_RULE, "annotations": {**NODE_RULE["annotations"], "rules": json.dumps(
        [{"_metricType": "node:node_net_bytes_transmitted:sum_irate", "condition_type": "<", "thresholds": "1.5",
          "unit": "Mbps"}])}}
    assert lib.migrate_rule(transmitted)["exprBuilder"]["node"]["metricThreshold"] == {
        "network": {"transmittedRate": 1500000}}
    plain = lib.migrate_rule({"alert": "a", "expr": "up == 0", "annotations": {"kind": "Node", "rules": "[]"}})
    assert "exprBuilder" not in plain and "severity" not in plain


def test_groups_per_rule_and_level() -> None:
    lib = library()
    cluster = lib.migrate(prometheus_rule("custom", NS, "cluster", NODE_RULE, {"record": "x", "expr": "1"}))
    assert [(g["kind"], g["metadata"]["name"], g["metadata"].get("namespace")) for g in cluster] == [
        ("ClusterRuleGroup", "node-cpu-high", None)]
    assert cluster[0]["metadata"]["labels"] == {"alerting.kubesphere.io/enable": "true"}
    assert cluster[0]["metadata"]["annotations"] == {"installer.kubesphere.io/migrated-from": f"{NS}/custom/0/0"}
    assert cluster[0]["spec"]["rules"] == [lib.migrate_rule(NODE_RULE)]
    namespaced = lib.migrate(prometheus_rule("custom", "demo", "namespace", WORKLOAD_RULE))
    assert [(g["kind"], g["metadata"]["name"], g["metadata"]["namespace"]) for g in namespaced] == [
        ("RuleGroup", "memory-of-deploy", "demo")]  # the alert name made a valid object name


class FakeCluster:
    """PrometheusRules and rule groups in memory, with the label selectors ks_alert_rules uses."""

    def __init__(self, rules: list[dict[str, Any]], groups: list[dict[str, Any]] | None = None) -> None:
        self.prometheus_rules = rules
        self.groups = {(g["kind"], g["metadata"].get("namespace"), g["metadata"]["name"]): g for g in groups or []}

    def rules(self, selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
        def matches(labels: dict[str, str]) -> bool:
            for term in selector.split(","):
                if "!=" in term:
                    key, value = term.split("!=")
                    if labels.get(key) == value:
                        return False
                else:
                    key, value = term.split("=")
                    if labels.get(key) != value:
                        return False
            return True
        return [json.loads(json.dumps(r)) for r in self.prometheus_rules
                if matches(r["metadata"].get("labels") or {})
                and (namespace is None or r["metadata"]["namespace"] == namespace)]

    def label_rule(self, rule: dict[str, Any], labels: dict[str, Any]) -> None:
        live = next(r for r in self.prometheus_rules if r["metadata"]["name"] == rule["metadata"]["name"]
                    and r["metadata"]["namespace"] == rule["metadata"]["namespace"])
        for key, value in labels.items():
            if value is None:
                live["metadata"]["labels"].pop(key, None)
            else:
                live["metadata"]["labels"][key] = value

    def group(self, group: dict[str, Any]) -> dict[str, Any] | None:
        return self.groups.get((group["kind"], group["metadata"].get("namespace"), group["metadata"]["name"]))

    def create(self, group: dict[str, Any]) -> None:
        key = (group["kind"], group["metadata"].get("namespace"), group["metadata"]["name"])
        assert key not in self.groups, f"{key} created over an existing group"
        self.groups[key] = group


def test_relabel_and_migrate_once() -> None:
    lib = library()
    legacy = {"metadata": {"name": "old", "namespace": "demo",
                           "labels": {"thanosruler": "thanos-ruler", "role": "thanos-alerting-rules", "x": "y"}}}
    users = {"kind": "RuleGroup", "metadata": {"name": "memory-of-deploy", "namespace": "demo"}}
    fake = FakeCluster([legacy, prometheus_rule("c", NS, "cluster", NODE_RULE),
                        prometheus_rule("elsewhere", "other", "cluster", NODE_RULE),
                        prometheus_rule("n", "demo", "namespace", WORKLOAD_RULE, WORKLOAD_RULE)], [users])
    assert lib.relabel(fake) == ["demo/old"]
    assert legacy["metadata"]["labels"] == {"thanos-ruler": "kubesphere", "role": "alert-rules", "x": "y"}
    assert lib.relabel(fake) == []

    out = lib.migrate_all(fake, NS)
    assert out["migrated"] == [f"{NS}/c", "demo/n"]  # cluster-level rules only from the monitoring namespace
    # The user's group of that name is kept; the two same-named rules get hash-suffixed names.
    created = sorted(out["created"])
    assert created[0] == "ClusterRuleGroup/node-cpu-high"
    assert len(created) == 3 and all(c.startswith("RuleGroup/demo/memory-of-deploy-") for c in created[1:])
    assert fake.groups[("RuleGroup", "demo", "memory-of-deploy")] is users
    labelled = [r["metadata"]["name"] for r in fake.prometheus_rules
                if r["metadata"]["labels"].get("migrated-to-alerting-v2beta1") == "true"]
    assert labelled == ["c", "n"]
    assert lib.migrate_all(fake, NS) == {"migrated": [], "created": [], "existing": [], "skipped": []}

    # An interrupted run (groups written, originals not labelled) is finished without duplicates.
    for rule in fake.prometheus_rules:
        rule["metadata"]["labels"].pop("migrated-to-alerting-v2beta1", None)
    again = lib.migrate_all(fake, NS)
    assert again["created"] == [] and sorted(again["existing"]) == created


def _with_rules(rule: dict[str, Any], **annotations: str) -> dict[str, Any]:
    return {**rule, "annotations": {**rule["annotations"], **annotations}}


def test_tenants_rules_that_cannot_be_migrated_are_skipped_and_reported() -> None:
    """A threshold out of range, a rules annotation nested too deep, group names taken in advance: each such rule is
    left unlabelled and listed, and every other rule is migrated."""
    lib = library()
    huge = _with_rules(NODE_RULE, rules=NODE_RULE["annotations"]["rules"].replace('"70"', '"1e5000"'))
    deep = _with_rules(WORKLOAD_RULE, rules="[" * 100_000 + "]" * 100_000)
    names = _with_rules(WORKLOAD_RULE, resources='[{"a": 1}]')
    taken = {**WORKLOAD_RULE, "alert": "taken"}
    suffix = lib._suffixed({"metadata": {"name": "taken", "annotations": {
        "installer.kubesphere.io/migrated-from": "demo/t/0/0"}}})["metadata"]["name"]
    squatters = [{"kind": "RuleGroup", "metadata": {"name": n, "namespace": "demo"}} for n in ("taken", suffix)]
    fake = FakeCluster([prometheus_rule("huge", NS, "cluster", huge),
                        prometheus_rule("deep", "demo", "namespace", deep),
                        prometheus_rule("names", "demo", "namespace", names),
                        prometheus_rule("t", "demo", "namespace", taken),
                        prometheus_rule("ok", "demo", "namespace", WORKLOAD_RULE)], squatters)
    out = lib.migrate_all(fake, NS)
    assert out["migrated"] == ["demo/ok"] and out["created"] == ["RuleGroup/demo/memory-of-deploy"]
    assert out["skipped"] == [
        f"PrometheusRule {NS}/huge: group 0 rule 0 (alert node-cpu-high): its threshold 1e5000 is out of range (at "
        "most 1e+15); left as it is",
        "PrometheusRule demo/deep: group 0 rule 0 (alert Memory_Of_Deploy): its rules or resources annotation is "
        "nested too deep; left as it is",
        "PrometheusRule demo/names: group 0 rule 0 (alert Memory_Of_Deploy): its kind, comparator or resources "
        "annotation is not what the console writes; left as it is",
        f"PrometheusRule demo/t: RuleGroup/demo/{suffix} and its name without the suffix hold other rules; left as "
        "it is"]
    labelled = [r["metadata"]["name"] for r in fake.prometheus_rules
                if r["metadata"]["labels"].get("migrated-to-alerting-v2beta1") == "true"]
    assert labelled == ["ok"]


def test_the_preview_shows_what_the_run_then_writes_and_writes_nothing() -> None:
    """Relabelled rules, created groups (under the names the run gives them) and labelled originals, one change per
    object, from reads alone; then the run writes exactly those."""
    lib = library()
    legacy = {"metadata": {"name": "old", "namespace": "demo",
                           "labels": {"thanosruler": "thanos-ruler", "role": "thanos-alerting-rules"}}}
    users = {"kind": "RuleGroup", "metadata": {"name": "memory-of-deploy", "namespace": "demo"}}
    huge = _with_rules(NODE_RULE, rules=NODE_RULE["annotations"]["rules"].replace('"70"', '"1e5000"'))
    fake = FakeCluster([legacy, prometheus_rule("c", NS, "cluster", NODE_RULE),
                        prometheus_rule("n", "demo", "namespace", WORKLOAD_RULE, WORKLOAD_RULE),
                        prometheus_rule("huge", "demo", "namespace", huge)], [users])
    before = json.dumps([fake.prometheus_rules, sorted(map(str, fake.groups))])
    p = {"namespace": NS, "relabel": True, "migrate": True}
    changes = lib.changes(fake, p)
    assert json.dumps([fake.prometheus_rules, sorted(map(str, fake.groups))]) == before  # nothing written
    shown = [(c.ref, c.action, c.fields) for c in changes]
    suffixed = [c.ref for c in changes if c.ref.startswith("RuleGroup/demo/memory-of-deploy-")]
    assert shown == [
        ("PrometheusRule/demo/old", "update", ['metadata.labels.thanos-ruler: + "kubesphere"',
                                               'metadata.labels.role: "thanos-alerting-rules" -> "alert-rules"',
                                               'metadata.labels.thanosruler: - "thanos-ruler"']),
        ("ClusterRuleGroup/node-cpu-high", "create", []),
        (f"PrometheusRule/{NS}/c", "update", ['metadata.labels.migrated-to-alerting-v2beta1: + "true"']),
        (suffixed[0], "create", []), (suffixed[1], "create", []),
        ("PrometheusRule/demo/n", "update", ['metadata.labels.migrated-to-alerting-v2beta1: + "true"']),
        ("PrometheusRule/demo/huge", "kept", [])]
    assert len(set(suffixed)) == 2  # the two same-named rules: a name each, not the user's
    assert changes[1].body["spec"]["rules"] == [lib.migrate_rule(NODE_RULE)]
    assert changes[-1].note.startswith("not migrated: group 0 rule 0 (alert node-cpu-high): its threshold 1e5000")

    relabelled = lib.relabel(fake)
    out = lib.migrate_all(fake, NS)
    assert [f"PrometheusRule/{r}" for r in relabelled] == [shown[0][0]]
    assert sorted(out["created"]) == sorted(c.ref for c in changes if c.action == "create")
    assert [f"PrometheusRule/{r}" for r in out["migrated"]] == [
        c.ref for c in changes if c.ref.startswith("PrometheusRule/") and c.fields and "migrated" in c.fields[0]]
    assert [s.split(":")[0] for s in out["skipped"]] == ["PrometheusRule demo/huge"]
    # Done: the preview of the next run shows nothing to write.
    assert [(c.ref, c.action) for c in lib.changes(fake, p)] == [("PrometheusRule/demo/huge", "kept")]
