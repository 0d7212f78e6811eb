"""What the installer finds in the cluster, forged or malformed: its state Secret, and objects labelled as a module's.
Each case runs the real reconcile, CLI or hook against the real API server."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import FIELD_MANAGER, MANAGED_BY, MODULE_LABEL, NAMESPACE, STATE_SECRET

from .conftest import REPO, Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"
DEEP = "[" * 50_000 + "]" * 50_000


def raw(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def hook(installer: Installer, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The hook for an edit of the cc, as shell-operator runs it (no snapshot: the full reconcile)."""
    context = tmp_path / "context.json"
    context.write_text(json.dumps([{"binding": "Monitor clusterconfiguration", "type": "Event"}]))
    return subprocess.run([sys.executable, str(HOOK)], env=installer.environ(BINDING_CONTEXT_PATH=str(context)),
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("_spec", raw('{"common":' + DEEP + "}"), "key '_spec': ValueError: common[0][0][0]"),
    ("monitoring", raw('{"module":"monitoring","hash":"h","inputs":{"a":' + DEEP + "}}"),
     "key 'monitoring': ValueError: inputs.a[0][0]"),
    ("ks-config", raw(json.dumps({"module": "ks-config", "hash": "h", "inputs": {}, "inventory": "everything"})),
     "key 'ks-config': TypeError: inventory: expected a list, got a string"),
    ("ks-core", raw(json.dumps({"module": "ks-core", "hash": "h", "inputs": {}, "applied_at": "2099-13-45"})),
     "key 'ks-core': ValueError: applied_at: not an RFC 3339 time"),
], ids=["deep-spec", "deep-entry", "inventory", "applied-at"])
def test_an_odd_state_stalls_with_a_message_and_nothing_crashes(installer: Installer, tmp_path: Path, key: str,
                                                                 value: str, message: str) -> None:
    core = client.CoreV1Api(installer.api)
    saved = core.read_namespaced_secret(STATE_SECRET, NAMESPACE).data
    objects = installer.module_objects()
    core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": {key: value}})
    try:
        installer.apply_cc(gatekeeper={"enabled": True})  # an install that would otherwise start
        proc = installer.reconcile()
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert message in proc.stderr and installer.ran(proc) == []
        stalled = installer.condition("Stalled")
        assert stalled["status"] == "True" and stalled["reason"] == "StateUnreadable"
        assert message in stalled["message"] and "nothing was run or uninstalled" in stalled["message"]
        assert installer.module_objects() == objects
        for command in (["plan"], ["plan", "--objects"]):
            shown = installer.cli(*command)
            assert shown.returncode == 2 and "Traceback" not in shown.stderr, shown.stderr[-2000:]
            assert message in shown.stderr
        shown = installer.cli("state", "show")
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr[-2000:]
        assert f"{key}: '<unreadable:" in shown.stdout and "[" * 100 not in shown.stdout  # never echoed
        ran = hook(installer, tmp_path)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr and message in ran.stderr, ran.stderr[-3000:]
        assert installer.module_objects() == objects
    finally:
        core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": {key: saved.get(key)}})


def plant(installer: Installer, namespace: str, name: str) -> None:
    """A ConfigMap that claims to be redis's: its label, the installer's field manager."""
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {**MANAGED_BY, MODULE_LABEL: "redis"}},
            "data": {"keep": "me"}}
    client.CoreV1Api(installer.api).api_client.call_api(
        f"/api/v1/namespaces/{namespace}/configmaps/{name}", "PATCH",
        query_params=[("fieldManager", FIELD_MANAGER), ("force", "true")], body=body,
        header_params={"Content-Type": "application/apply-patch+yaml"}, auth_settings=["BearerToken"])


def test_an_uninstall_deletes_nothing_outside_its_namespaces(installer: Installer) -> None:
    core = client.CoreV1Api(installer.api)
    victims = [("default", "victim")]
    for namespace, name in [*victims, (NAMESPACE, "recorded")]:
        plant(installer, namespace, name)
    forged = {"module": "redis", "hash": "forged", "inputs": {}, "applied_at": "2024-01-01T00:00:00Z",
              "inventory": [["v1", "ConfigMap", "default", "victim"], ["v1", "ConfigMap", NAMESPACE, "recorded"]]}
    core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": {"redis": raw(json.dumps(forged))}})
    try:
        proc = installer.reconcile()
        assert proc.returncode == 0 and installer.ran(proc) == ["redis"], proc.stderr[-3000:]
        for namespace, name in victims:  # labelled and written by the installer's manager, yet not redis's
            assert core.read_namespaced_config_map(name, namespace).data == {"keep": "me"}
        with pytest.raises(ApiException) as gone:  # recorded, in redis's namespace: deleted as before
            core.read_namespaced_config_map("recorded", NAMESPACE)
        assert gone.value.status == 404
        assert ("[redis] not deleted although it carries the module's label: ConfigMap/default/victim: namespace "
                "default is not one of module redis's") in proc.stderr
    finally:
        for namespace, name in victims:
            core.delete_namespaced_config_map(name, namespace)


def test_a_forged_writer_of_a_newer_state_is_quoted_not_a_log_line(installer: Installer) -> None:
    core = client.CoreV1Api(installer.api)
    saved = core.read_namespaced_secret(STATE_SECRET, NAMESPACE).data
    forged = {"_format": raw("9"), "_writer": raw(json.dumps("9.9\n[error] forged\x1b[31m"))}
    core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": forged})
    try:
        proc = installer.reconcile()
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert 'written by ks-installer "9.9\\n[error] forged\\u001b[31m" in state format 9' in proc.stderr
        assert "\x1b" not in proc.stderr and not any(line.startswith("[error] forged")
                                                     for line in proc.stderr.splitlines())
        assert installer.condition("Stalled")["reason"] == "StateFromNewerInstaller"
    finally:
        core.patch_namespaced_secret(STATE_SECRET, NAMESPACE, {"data": {k: saved.get(k) for k in forged}})


def test_the_retry_annotation_and_purge_names_cannot_forge_log_lines(installer: Installer, tmp_path: Path) -> None:
    forged = "x\n[error] forged\x1b[31m\u202e"
    installer.custom.patch_namespaced_custom_object(
        "installer.kubesphere.io", "v1alpha1", NAMESPACE, "clusterconfigurations", "ks-installer",
        {"metadata": {"annotations": {"installer.kubesphere.io/retry": forged,
                                      "installer.kubesphere.io/purge": f"redis,{forged}"}}})
    context = tmp_path / "context.json"
    context.write_text(json.dumps([{"binding": "Retry annotation", "type": "Event"}]))
    proc = subprocess.run([sys.executable, str(HOOK)], env=installer.environ(BINDING_CONTEXT_PATH=str(context)),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    escaped = "x\\n[error] forged\\u001b[31m\\u202e"
    assert f"Retry requested (installer.kubesphere.io/retry={escaped})" in proc.stderr
    assert f"installer.kubesphere.io/purge names unknown modules, ignored: {escaped}" in proc.stderr
    assert "\x1b" not in proc.stderr and "\u202e" not in proc.stderr
    assert not any(line.startswith("[error] forged") for line in proc.stderr.splitlines())


OAUTH = {"identityProviders": [{"name": "github", "type": "GitHubIdentityProvider", "mappingMethod": "auto",
                                "provider": {"clientID": "id", "clientSecret": "CS-canary-1",
                                             "privateKey": "PK-canary-1", "redirectURL": "https://r.example"}}]}


def test_plan_objects_shows_that_a_credential_changed_never_its_value(installer: Installer) -> None:
    installer.apply_cc(authentication={"jwtSecret": "", "oauthOptions": OAUTH})
    installer.reconcile_ok()
    changed = json.loads(json.dumps(OAUTH).replace("CS-canary-1", "CS-canary-2"))
    installer.apply_cc(authentication={"jwtSecret": "", "oauthOptions": changed})
    shown = installer.cli("plan", "--objects", "--module", "ks-config")
    assert shown.returncode == 1, shown.stderr[-3000:]
    assert "canary" not in shown.stdout + shown.stderr
    assert "+        clientSecret: <redacted> (changed)" in shown.stdout
    printed = installer.cli("plan", "--objects", "--module", "ks-config", "-o", "yaml")
    assert "canary" not in printed.stdout + printed.stderr
    (config,) = [d["data"]["kubesphere.yaml"] for d in yaml.safe_load_all(printed.stdout)
                 if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kubesphere-config"]
    assert "clientSecret: <redacted>" in config and "privateKey: <redacted>" in config
    assert "redirectURL: https://r.example" in config


def test_tenants_alerting_rules_are_skipped_and_reported_never_stop_the_task(
        installer: Installer, monkeypatch: pytest.MonkeyPatch) -> None:
    from installer.ansible_tasks import WARNINGS_KEY, ks_alert_rules

    core, tenant = client.CoreV1Api(installer.api), "hostile-tenant"
    core.create_namespace({"metadata": {"name": tenant}})
    rule = {"alert": "mem-high", "expr": "x > 1", "labels": {"severity": "critical"},
            "annotations": {"kind": "Deployment", "resources": '["web"]', "rules": json.dumps([{
                "_metricType": "namespace:workload_memory_usage:sum{$1}", "condition_type": ">=",
                "thresholds": 2, "unit": "Mi"}])}}

    def prometheus_rule(name: str, **annotations: str) -> dict:
        return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                "metadata": {"name": name, "namespace": tenant, "labels": {"custom-alerting-rule-level": "namespace"}},
                "spec": {"groups": [{"name": "g", "rules": [{**rule, "alert": name,
                                                             "annotations": {**rule["annotations"], **annotations}}]}]}}

    rules = [prometheus_rule("huge", rules=rule["annotations"]["rules"].replace(": 2,", ': "1e5000",')),
             prometheus_rule("deep", rules="[" * 100_000 + "]" * 100_000),
             prometheus_rule("taken"), prometheus_rule("fine")]
    suffix = ks_alert_rules._suffixed({"metadata": {"name": "taken", "annotations": {
        ks_alert_rules.ORIGIN_ANNOTATION: f"{tenant}/taken/0/0"}}})["metadata"]["name"]
    try:
        for body in rules:
            installer.custom.create_namespaced_custom_object("monitoring.coreos.com", "v1", tenant,
                                                             "prometheusrules", body)
        for name in ("taken", suffix):  # a tenant's own groups, made before the migration
            installer.custom.create_namespaced_custom_object(
                "alerting.kubesphere.io", "v2beta1", tenant, "rulegroups",
                {"apiVersion": "alerting.kubesphere.io/v2beta1", "kind": "RuleGroup",
                 "metadata": {"name": name, "namespace": tenant}, "spec": {"rules": []}})
        monkeypatch.setattr(ks_alert_rules, "api_client", lambda: installer.api)
        result = ks_alert_rules.run({"namespace": "kubesphere-monitoring-system", "relabel": False, "migrate": True})
        # (the shared cluster may hold other modules' rules: only the tenant's are asserted)
        assert [m for m in result["migrated"] if m.startswith(f"{tenant}/")] == [f"{tenant}/fine"]
        assert [c for c in result["created"] if f"/{tenant}/" in c] == [f"RuleGroup/{tenant}/fine"]
        skipped = "\n".join(result["skipped"])
        assert f"PrometheusRule {tenant}/huge: group 0 rule 0 (alert huge): its threshold 1e5000 is out of range" \
            in skipped
        assert f"PrometheusRule {tenant}/deep: group 0 rule 0 (alert deep): its rules or resources annotation is " \
            "nested too deep" in skipped
        assert f"PrometheusRule {tenant}/taken: RuleGroup/{tenant}/{suffix} and its name without the suffix hold " \
            "other rules" in skipped
        assert len(result[WARNINGS_KEY]) == 3
        groups = installer.custom.list_namespaced_custom_object("alerting.kubesphere.io", "v2beta1", tenant,
                                                                "rulegroups")["items"]
        assert sorted(g["metadata"]["name"] for g in groups) == sorted(["fine", "taken", suffix])
    finally:
        core.delete_namespace(tenant)
