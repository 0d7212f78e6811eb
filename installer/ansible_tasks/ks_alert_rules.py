"""ks_alert_rules: bring KubeSphere's older alerting rules to v3.4 (upstream ks-monitor tasks/thanos-ruler.yaml's
relabelling and files/alert-migrate/migrate-alertrules.sh, without kubectl, jq or a shell)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError

from installer.ansible_tasks import WARNINGS_KEY, TaskFailed, argument_spec, preview_params, task_plugin
from installer.escape import escaped
from installer.objects.api_errors import api_reason
from installer.objects.kube import api_client

DOCUMENTATION = r"""
module: ks_alert_rules
short_description: Relabel legacy Thanos Ruler PrometheusRules and migrate v1beta1 custom alerting rules to
  alerting.kubesphere.io/v2beta1 rule groups.
description:
  - Relabel - PrometheusRules labelled thanosruler=thanos-ruler,role=thanos-alerting-rules (any namespace) get
    thanos-ruler=kubesphere,role=alert-rules and lose thanosruler, the labels ks-apiserver v3.4 looks for.
  - Migrate - every rule of a PrometheusRule labelled custom-alerting-rule-level=cluster (in I(namespace)) or
    =namespace (any namespace) becomes a ClusterRuleGroup or a RuleGroup (in the rule's namespace) named after its
    alert, with alerting.kubesphere.io/enable=true and the v1beta1 threshold as an exprBuilder; then the
    PrometheusRule is labelled migrated-to-alerting-v2beta1=true and never migrated again.
  - The groups are the user's - no installer label, never pruned or deleted by the installer. An existing group is
    never overwritten - one that came from the same rule (annotation installer.kubesphere.io/migrated-from, e.g.
    written by an interrupted run) counts as done; another one of that name makes the new group's name take a
    hash suffix.
  - Kinds the cluster does not serve mean nothing to do (no prometheus-operator CRDs), or a failure when there
    are rules to migrate and the rule group kinds (ks-core's CRDs) are missing.
options:
  namespace: {description: Namespace of the cluster-level custom rules., type: str,
              default: kubesphere-monitoring-system}
  relabel: {description: Relabel the legacy Thanos Ruler rules., type: bool, default: true}
  migrate: {description: Migrate the v1beta1 custom rules., type: bool, default: true}
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = False

RULES_API = "monitoring.coreos.com/v1"
GROUPS_API = "alerting.kubesphere.io/v2beta1"
ALERTING_FIELD_MANAGER = "ks-installer-alerting"
LEGACY_SELECTOR = "thanosruler=thanos-ruler,role=thanos-alerting-rules"
RELABEL = {"thanos-ruler": "kubesphere", "role": "alert-rules", "thanosruler": None}
LEVEL_LABEL = "custom-alerting-rule-level"
MIGRATED_LABEL = "migrated-to-alerting-v2beta1"
ORIGIN_ANNOTATION = "installer.kubesphere.io/migrated-from"
ENABLE_LABEL = "alerting.kubesphere.io/enable"

#: v1beta1 metric (the part of the rule's _metricType before "{") → v2beta1 threshold type, field and the factor
#: from the console's unit to v2beta1's. Upstream's script spelled the node "network" type "netowrk" for
#: transmittedRate, so that threshold was lost: fixed here.
NODE_METRICS: dict[str, tuple[str, str, int | float]] = {
    "node:node_cpu_utilisation:avg1m": ("cpu", "utilization", 0.01),
    "node:load1:ratio": ("cpu", "load1m", 1),
    "node:load5:ratio": ("cpu", "load5m", 1),
    "node:load15:ratio": ("cpu", "load15m", 1),
    "node:node_memory_utilisation:": ("memory", "utilization", 0.01),
    "node:node_memory_bytes_available:sum": ("memory", "available", 1024 * 1024 * 1024),
    "node:node_net_bytes_transmitted:sum_irate": ("network", "transmittedRate", 1000 * 1000),
    "node:node_net_bytes_received:sum_irate": ("network", "receivedRate", 1000 * 1000),
    "node:disk_space_utilization:ratio": ("disk", "spaceUtilization", 0.01),
    "node:disk_space_available:": ("disk", "spaceAvailable", 1000 * 1000 * 1000),
    "node:disk_inode_utilization:ratio": ("disk", "inodeUtilization", 0.01),
    "node:data_volume_iops_reads:sum": ("disk", "iopsRead", 1),
    "node:data_volume_iops_writes:sum": ("disk", "iopsWrite", 1),
    "node:data_volume_throughput_bytes_read:sum": ("disk", "throughputRead", 1000),
    "node:data_volume_throughput_bytes_write:sum": ("disk", "throughputWrite", 1000),
    "node:pod_utilization:ratio": ("pod", "utilization", 0.01),
    "node:pod_abnormal:ratio": ("pod", "abnormalRatio", 0.01),
}
WORKLOAD_METRICS: dict[str, tuple[str, str, int | float]] = {
    "namespace:workload_cpu_usage:sum": ("cpu", "usage", 1),
    "namespace:workload_memory_usage:sum": ("memory", "usage", 1024 * 1024),
    "namespace:workload_memory_usage_wo_cache:sum": ("memory", "usageWoCache", 1024 * 1024),
    "namespace:workload_net_bytes_transmitted:sum_irate": ("network", "transmittedRate", 1000 * 1000),
    "namespace:workload_net_bytes_received:sum_irate": ("network", "receivedRate", 1000 * 1000),
    "namespace:$2_unavailable_replicas:ratio": ("replica", "unavailableRatio", 0.01),
}
METRICS = {**NODE_METRICS, **WORKLOAD_METRICS}
#: What v2beta1 keeps elsewhere (severity, exprBuilder) or no longer has.
DROPPED = {"labels": ("severity", "alerttype", "rule_id"),
           "annotations": ("kind", "resources", "rules", "rule_update_time")}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
MAX_THRESHOLD = Decimal("1e15")
"""The largest threshold (after scaling) a migrated rule may hold: beyond it, the console's number is not one."""


class Skipped(Exception):
    """A tenant's rule this task cannot migrate: it is left as it is (not labelled migrated) and reported."""


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    except RecursionError:
        raise Skipped("its rules or resources annotation is nested too deep") from None


def _scaled(threshold: Any, factor: int | float) -> int | float | None:
    """``threshold`` (a number or a numeric string) times ``factor``, in decimal so 70 x 0.01 is 0.7; None when it is
    no number. Skipped when it is one, but not finite or larger than MAX_THRESHOLD (``1e5000``)."""
    text = str(threshold).strip()
    try:
        value = Decimal(text) * Decimal(str(factor))
    except (InvalidOperation, ValueError):
        return None
    if not value.is_finite() or abs(value) > MAX_THRESHOLD:
        raise Skipped(f"its threshold {escaped(text, 40)} is out of range (at most {MAX_THRESHOLD:e})")
    return int(value) if value == value.to_integral_value() else float(value)


def expr_builder(annotations: dict[str, Any]) -> dict[str, Any] | None:
    """The v2beta1 exprBuilder of a v1beta1 rule made in the console (annotations kind, resources, rules), or
    None when they do not describe a known metric threshold (the rule keeps only its expr)."""
    kind = annotations.get("kind")
    rules = _json(annotations.get("rules"))
    info = rules[0] if isinstance(rules, list) and rules and isinstance(rules[0], dict) else {}
    metric_type = info.get("_metricType")
    metric = metric_type.split("{", 1)[0] if isinstance(metric_type, str) else None
    found = METRICS.get(metric) if metric else None
    comparator, thresholds, unit = info.get("condition_type"), info.get("thresholds"), info.get("unit")
    if kind is None or found is None or comparator is None or thresholds is None or unit is None:
        return None
    threshold_type, field, factor = found
    value = _scaled(thresholds, factor)
    if value is None:
        return None
    names = _json(annotations.get("resources"))
    if not isinstance(comparator, str) or not isinstance(kind, str) or not (
            names is None or (isinstance(names, list) and all(isinstance(n, str) for n in names))):
        raise Skipped("its kind, comparator or resources annotation is not what the console writes")
    spec: dict[str, Any] = {"names": names, "comparator": comparator,
                            "metricThreshold": {threshold_type: {field: value}}}
    if kind != "Node":
        spec["kind"] = kind
    return {"node" if kind == "Node" else "workload": spec}


def migrate_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A v1beta1 rule as a v2beta1 rule (upstream's jq migrateRule, without the group around it)."""
    out = json.loads(json.dumps(rule))
    labels = out.get("labels") if isinstance(out.get("labels"), dict) else {}
    annotations = out.get("annotations") if isinstance(out.get("annotations"), dict) else {}
    if labels.get("severity") is not None:
        out["severity"] = labels["severity"]
    builder = expr_builder(annotations)
    if builder is not None:
        out["exprBuilder"] = builder
    for section, keys in DROPPED.items():
        if isinstance(out.get(section), dict):
            for key in keys:
                out[section].pop(key, None)
    return out


def group_name(alert: Any) -> str:
    """The rule group's name: the alert's (upstream's), made a valid object name if it is not one."""
    name = str(alert or "")
    if _NAME.match(name):
        return name
    name = re.sub(r"[^a-z0-9.-]+", "-", name.lower())
    name = re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", name[:253])
    return name or "migrated-rule"


def migrate(prometheus_rule: dict[str, Any]) -> list[dict[str, Any]]:
    """One ClusterRuleGroup (level cluster) or RuleGroup (level namespace, in the rule's namespace) per rule of a
    v1beta1 custom PrometheusRule, each annotated with the rule it came from. Skipped names the first rule that
    cannot be migrated."""
    meta = prometheus_rule.get("metadata") or {}
    namespace = meta.get("namespace")
    level = (meta.get("labels") or {}).get(LEVEL_LABEL)
    groups = []
    for g, group in enumerate((prometheus_rule.get("spec") or {}).get("groups") or []):
        for r, rule in enumerate(group.get("rules") or []):
            if not isinstance(rule, dict) or not rule.get("alert"):
                continue  # a recording rule: v1beta1 custom rules have none, v2beta1 groups hold alerts only
            origin = f"{namespace}/{meta.get('name')}/{g}/{r}"
            try:
                migrated = migrate_rule(rule)
            except Skipped as exc:
                raise Skipped(f"group {g} rule {r} (alert {escaped(rule['alert'], 60)}): {exc}") from None
            metadata: dict[str, Any] = {"name": group_name(rule["alert"]), "labels": {ENABLE_LABEL: "true"},
                                        "annotations": {ORIGIN_ANNOTATION: origin}}
            if level == "namespace":
                metadata["namespace"] = namespace
            groups.append({"apiVersion": GROUPS_API, "kind": "ClusterRuleGroup" if level == "cluster" else "RuleGroup",
                           "metadata": metadata, "spec": {"rules": [migrated]}})
    return groups


def _suffixed(group: dict[str, Any]) -> dict[str, Any]:
    """The group under a name another group does not hold: its name plus a hash of where it came from."""
    origin = group["metadata"]["annotations"][ORIGIN_ANNOTATION]
    suffix = hashlib.sha256(origin.encode()).hexdigest()[:8]
    out = json.loads(json.dumps(group))
    out["metadata"]["name"] = f"{group['metadata']['name'][:244].rstrip('.-')}-{suffix}"
    return out


def _ident(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']}/{meta['namespace'] + '/' if meta.get('namespace') else ''}{meta['name']}"


def _rule_ref(rule: dict[str, Any]) -> str:
    return f"{rule['metadata']['namespace']}/{rule['metadata']['name']}"


class Cluster:
    """The few API calls the module makes (a class, so the logic above stays testable without a cluster)."""

    def __init__(self, api: Any = None) -> None:
        self.dyn = DynamicClient(api if api is not None else api_client())

    def resource(self, api_version: str, kind: str) -> Any:
        try:
            return self.dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            return None

    def rules(self, selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
        res = self.resource(RULES_API, "PrometheusRule")
        if res is None:
            return []
        return [i.to_dict() for i in res.get(namespace=namespace, label_selector=selector).items]

    def label_rule(self, rule: dict[str, Any], labels: dict[str, Any]) -> None:
        res = self.resource(RULES_API, "PrometheusRule")
        res.patch(name=rule["metadata"]["name"], namespace=rule["metadata"]["namespace"],
                  body={"metadata": {"labels": labels}}, content_type="application/merge-patch+json",
                  field_manager=ALERTING_FIELD_MANAGER)

    def _groups(self, group: dict[str, Any]) -> Any:
        res = self.resource(group["apiVersion"], group["kind"])
        if res is None:
            raise RuntimeError(f"{group['kind']} ({group['apiVersion']}) is not served: its CustomResourceDefinition, "
                               "which the ks-core module installs, is missing")
        return res

    def group(self, group: dict[str, Any]) -> dict[str, Any] | None:
        """The live group of ``group``'s kind, namespace and name, or None."""
        try:
            return self._groups(group).get(name=group["metadata"]["name"],
                                           namespace=group["metadata"].get("namespace")).to_dict()
        except NotFoundError:
            return None

    def create(self, group: dict[str, Any]) -> None:
        self._groups(group).create(body=group, namespace=group["metadata"].get("namespace"),
                                   field_manager=ALERTING_FIELD_MANAGER)


# --- Decisions (reads only): what a run writes, and what its preview shows ----------------------------------------


def relabelled(labels: dict[str, Any]) -> list[str]:
    """The label changes the relabelling makes to a rule with ``labels`` (as a change's field lines)."""
    out = []
    for key, value in RELABEL.items():
        path = f"metadata.labels.{key}"
        if value is None:
            if key in labels:
                out.append(f"{path}: - {json.dumps(labels[key])}")
        elif key not in labels:
            out.append(f"{path}: + {json.dumps(value)}")
        elif labels[key] != value:
            out.append(f"{path}: {json.dumps(labels[key])} -> {json.dumps(value)}")
    return out


def legacy_rules(cluster: Any) -> list[dict[str, Any]]:
    """The legacy Thanos Ruler rules to relabel."""
    return cluster.rules(LEGACY_SELECTOR)


def pending_rules(cluster: Any, namespace: str) -> list[dict[str, Any]]:
    """The v1beta1 custom rules not migrated yet: cluster-level ones in ``namespace``, namespace-level ones anywhere."""
    return [*cluster.rules(f"{LEVEL_LABEL}=cluster,{MIGRATED_LABEL}!=true", namespace),
            *cluster.rules(f"{LEVEL_LABEL}=namespace,{MIGRATED_LABEL}!=true")]


def _origin(group: dict[str, Any]) -> Any:
    return ((group.get("metadata") or {}).get("annotations") or {}).get(ORIGIN_ANNOTATION)


@dataclass
class Migration:
    """What migrating one v1beta1 rule does: each group created or found done (in order), or why it is skipped."""

    rule: dict[str, Any]
    groups: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """``(create | existing, group)``."""
    skipped: str | None = None


class Placer:
    """Where each migrated group goes: its name, or its name with a hash suffix when a group from another rule holds
    it (live, or placed earlier by the same migration). Reads only."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.placed: dict[tuple[str, Any, str], dict[str, Any]] = {}

    def _holder(self, group: dict[str, Any]) -> dict[str, Any] | None:
        key = (group["kind"], group["metadata"].get("namespace"), group["metadata"]["name"])
        return self.placed[key] if key in self.placed else self.cluster.group(group)

    def place(self, group: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """``create`` or ``existing`` (a group from the same rule holds the name: an interrupted run's), and the group
        under the name it takes. Skipped when both names hold other rules."""
        for candidate in (group, _suffixed(group)):
            holder = self._holder(candidate)
            if holder is None:
                return "create", candidate
            if _origin(holder) == _origin(candidate):
                return "existing", candidate
        raise Skipped(f"{_ident(_suffixed(group))} and its name without the suffix hold other rules")

    def migration(self, rule: dict[str, Any]) -> Migration:
        """The rule's groups, each placed; a rule that cannot be migrated is skipped (nothing of it is placed)."""
        out = Migration(rule)
        try:
            for group in migrate(rule):
                outcome, group = self.place(group)
                out.groups.append((outcome, group))
                self.placed[(group["kind"], group["metadata"].get("namespace"), group["metadata"]["name"])] = group
        except (Skipped, ValueError, TypeError, AttributeError, KeyError) as exc:
            for _, group in out.groups:
                self.placed.pop((group["kind"], group["metadata"].get("namespace"), group["metadata"]["name"]), None)
            why = str(exc) if isinstance(exc, Skipped) else f"not a rule this installer can read ({type(exc).__name__})"
            return Migration(rule, skipped=why)
        return out


def migrations(cluster: Any, namespace: str) -> list[Migration]:
    """Every pending rule's migration, decided in order against the cluster as the run leaves it."""
    placer = Placer(cluster)
    return [placer.migration(rule) for rule in pending_rules(cluster, namespace)]


# --- The run's writes ---------------------------------------------------------------------------------------------


def relabel(cluster: Any) -> list[str]:
    done = []
    for rule in legacy_rules(cluster):
        cluster.label_rule(rule, RELABEL)
        done.append(_rule_ref(rule))
    return done


def _skipped(rule: dict[str, Any], why: str) -> str:
    return f"PrometheusRule {_rule_ref(rule)}: {why}; left as it is"


def migrate_all(cluster: Any, namespace: str) -> dict[str, list[str]]:
    """Migrate every v1beta1 custom PrometheusRule not yet migrated (:func:`migrations`); label each once all its
    groups exist. A tenant's rule that cannot be migrated (a threshold out of range, an annotation nested too deep,
    rule group names taken, a group the API server refuses) is left unlabelled and listed in ``skipped``: it never
    stops the module."""
    out: dict[str, list[str]] = {"migrated": [], "created": [], "existing": [], "skipped": []}
    for migration in migrations(cluster, namespace):
        rule = migration.rule
        if migration.skipped is not None:
            out["skipped"].append(_skipped(rule, migration.skipped))
            continue
        try:
            for outcome, group in migration.groups:
                if outcome == "create":
                    try:
                        cluster.create(group)
                    except DynamicApiError as exc:
                        if exc.status not in (400, 409, 422):
                            raise
                        raise Skipped(f"the API server refused {_ident(group)}: "
                                      f"{escaped(api_reason(exc), 200)}") from None
                out["created" if outcome == "create" else "existing"].append(_ident(group))
        except Skipped as exc:
            out["skipped"].append(_skipped(rule, str(exc)))
            continue
        cluster.label_rule(rule, {MIGRATED_LABEL: "true"})
        out["migrated"].append(_rule_ref(rule))
    return out


def run(p: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, list[str]] = {"relabelled": [], "migrated": [], "created": [], "existing": [], "skipped": []}
    try:
        cluster = Cluster()
        if p["relabel"]:
            result["relabelled"] = relabel(cluster)
        if p["migrate"]:
            result.update(migrate_all(cluster, p["namespace"]))
    except Exception as exc:  # API errors become a task failure with their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}", **result) from exc
    return {"changed": bool(result["relabelled"] or result["migrated"] or result["created"]), **result,
            WARNINGS_KEY: [f"custom alerting rule not migrated: {why}" for why in result["skipped"]]}


# --- Preview ------------------------------------------------------------------------------------------------------


def changes(cluster: Any, p: dict[str, Any]) -> list[Any]:
    """What :func:`run` would write, one change per object (``installer.objects.results.Change``): each legacy rule
    relabelled, each rule group created, each migrated rule labelled, each rule left as it is (kept, with why)."""
    from installer.objects.results import Change

    out = []
    if p["relabel"]:
        for rule in legacy_rules(cluster):
            fields = relabelled(rule["metadata"].get("labels") or {})
            out.append(Change(f"PrometheusRule/{_rule_ref(rule)}", "update", fields,
                              note="relabelled for KubeSphere v3.4's Thanos Ruler"))
    if p["migrate"]:
        for migration in migrations(cluster, p["namespace"]):
            ref = f"PrometheusRule/{_rule_ref(migration.rule)}"
            if migration.skipped is not None:
                out.append(Change(ref, "kept", note=f"not migrated: {migration.skipped}"))
                continue
            for outcome, group in migration.groups:
                if outcome == "create":
                    out.append(Change(_ident(group), "create", note=f"migrated from {ref}", body=group))
            done = [_ident(g) for outcome, g in migration.groups if outcome == "existing"]
            note = "migrated" + (f" (already there: {', '.join(done)})" if done else "")
            out.append(Change(ref, "update", [f"metadata.labels.{MIGRATED_LABEL}: + \"true\""], note=note))
    return out


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """:func:`changes` against the cluster (reads only; offline, none: there is nothing to migrate from)."""
    if api is None:
        return []
    return changes(Cluster(api), preview_params(ARGUMENT_SPEC, args))
