"""``python -m installer plan -o json``: the dry-run plan, without a cluster."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_zygote import ENGINE
from installer_state import DEFAULT_CC, cc_with

REPO = Path(__file__).resolve().parents[2]
DEFAULT_ENABLED = ["ks-config", "ks-core", "monitoring", "preinstall"]


def _cc(tmp_path: Path, name: str, **changes: Any) -> Path:
    out = tmp_path / f"{name}.yaml"
    out.write_text(yaml.safe_dump(cc_with(**changes)))
    return out


def plan(*args: Path | str) -> tuple[int, dict[str, Any] | None, str]:
    proc = subprocess.run([*ENGINE, "plan", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, check=False)
    if proc.returncode:
        return proc.returncode, None, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected exactly one JSON line, got: {proc.stdout!r}"
    return 0, json.loads(lines[0]), proc.stderr


def test_first_install_plans_exactly_the_default_enabled_modules(tmp_path: Path) -> None:
    rc, out, _ = plan("--desired", _cc(tmp_path, "d"), "-o", "json")
    assert rc == 0
    assert sorted(out["install"]) == DEFAULT_ENABLED
    assert out["upgrade"] == out["uninstall"] == out["blocked"] == []
    assert "logging" in out["unchanged"] and "opensearch" in out["unchanged"]


def test_no_op_runs_nothing(tmp_path: Path) -> None:
    cc = _cc(tmp_path, "d")
    rc, out, _ = plan("--desired", cc, "--last-applied", cc, "-o", "json")
    assert rc == 0
    assert out["install"] == out["upgrade"] == out["uninstall"] == [] and out["changes"] == {}
    assert len(out["unchanged"]) == 22


def test_single_field_change_reruns_only_modules_reading_it(tmp_path: Path) -> None:
    last = _cc(tmp_path, "last")
    desired = _cc(tmp_path, "desired", etcd__monitoring=True)
    rc, out, _ = plan("--desired", desired, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert out["upgrade"] == ["monitoring"]
    assert out["changes"] == {"monitoring": ["etcd.monitoring: false -> true"]}


def test_console_port_changes_only_ks_core(tmp_path: Path) -> None:
    last = _cc(tmp_path, "last")
    desired = copy.deepcopy(DEFAULT_CC)
    desired["spec"]["common"]["core"]["console"]["port"] = 30881
    path = tmp_path / "desired.yaml"
    path.write_text(yaml.safe_dump(desired))
    rc, out, _ = plan("--desired", path, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert out["upgrade"] == ["ks-core"]
    assert out["changes"]["ks-core"] == ["common.core.console.port: 30880 -> 30881"]


def test_multi_login_changes_only_ks_config(tmp_path: Path) -> None:
    last = _cc(tmp_path, "last")
    desired = copy.deepcopy(DEFAULT_CC)
    desired["spec"]["common"]["core"]["console"]["enableMultiLogin"] = False
    path = tmp_path / "desired.yaml"
    path.write_text(yaml.safe_dump(desired))
    rc, out, _ = plan("--desired", path, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert out["upgrade"] == ["ks-config"]  # kubesphere.yaml's multipleLogin; the ks-core objects do not read it
    assert out["changes"]["ks-config"] == ["common.core.console.enableMultiLogin: true -> false"]


def test_enable_installs_the_module_and_what_it_derives(tmp_path: Path) -> None:
    last = _cc(tmp_path, "last")
    desired = _cc(tmp_path, "desired", logging={"enabled": True, "logsidecar": {"enabled": True, "replicas": 2}})
    rc, out, _ = plan("--desired", desired, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert sorted(out["install"]) == ["fluentbit", "logging", "opensearch"]
    assert out["upgrade"] == ["ks-config"]  # kubesphere-config gains the logging section
    assert out["uninstall"] == []


def test_disable_uninstalls(tmp_path: Path) -> None:
    last = _cc(tmp_path, "last", gatekeeper={"enabled": True})
    desired = _cc(tmp_path, "desired", gatekeeper={"enabled": False})
    rc, out, _ = plan("--desired", desired, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert out["uninstall"] == ["gatekeeper"] and out["install"] == [] and out["upgrade"] == []


def test_derived_dependency_opensearch_goes_when_its_last_consumer_goes(tmp_path: Path) -> None:
    both = {"logging": {"enabled": True, "logsidecar": {"enabled": True, "replicas": 2}},
            "events": {"enabled": True, "ruler": {"enabled": True, "replicas": 2}}}
    last = _cc(tmp_path, "last", **both)
    one_left = _cc(tmp_path, "one", **{**both, "events": {"enabled": False, "ruler": {"enabled": True, "replicas": 2}}})
    rc, out, _ = plan("--desired", one_left, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert out["uninstall"] == ["events"]  # logging still needs opensearch and fluentbit
    none_left = _cc(tmp_path, "none", logging={"enabled": False, "logsidecar": {"enabled": True, "replicas": 2}},
                    events={"enabled": False, "ruler": {"enabled": True, "replicas": 2}})
    rc, out, _ = plan("--desired", none_left, "--last-applied", last, "-o", "json")
    assert sorted(out["uninstall"]) == ["events", "fluentbit", "logging", "opensearch"]


def test_an_external_log_store_set_later_upgrades_opensearch_and_moves_its_status(tmp_path: Path) -> None:
    """The module stays (its curator serves the external store); only the internal cluster goes, and with it
    upstream's status.opensearch; the Elasticsearch path is the same module under status.es."""
    from installer.modules import get_module

    logging_on = {"enabled": True, "logsidecar": {"enabled": True, "replicas": 2}}
    last = _cc(tmp_path, "last", logging=logging_on)
    external = {"opensearch": {"enabled": True, "externalOpensearchHost": "os.example.com"}}
    desired = _cc(tmp_path, "desired", logging=logging_on, common=external)
    rc, out, _ = plan("--desired", desired, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert "opensearch" in out["upgrade"] and out["uninstall"] == []
    opensearch = get_module("opensearch")
    logs = {"logging": {"enabled": True}}
    assert opensearch.status_keys(logs) == {"opensearch": True, "es": False}
    assert opensearch.status_keys({**logs, "common": external}) == {"opensearch": False, "es": False}
    es = {"es": {"enabled": True}, "opensearch": {"enabled": False}}
    assert opensearch.enabled({**logs, "common": es})
    assert opensearch.status_keys({**logs, "common": es}) == {"opensearch": False, "es": True}
    assert not opensearch.enabled({**logs, "common": {"opensearch": {"enabled": False}}})
    assert not opensearch.enabled({"common": es})  # no consumer


def test_blocked_when_a_required_module_is_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    import installer.engine.plan as plan_mod
    from installer.engine.plan import Action, build_plan
    from installer.modules import MODULES, Module

    # alerting requires monitoring, which the registry always enables: switch it off for this case.
    fake = tuple(Module("monitoring", lambda s: False, m.inputs) if m.name == "monitoring" else m for m in MODULES)
    monkeypatch.setattr(plan_mod, "MODULES", fake)
    p = build_plan({"alerting": {"enabled": True}}, {}, lambda m: "files")
    assert p.step("alerting").action == Action.BLOCKED
    assert "monitoring" in p.step("alerting").reason
    assert "alerting" in p.to_json()["blocked"]


@pytest.mark.parametrize("bad, field", [
    ({"multicluster": {"clusterRole": "hub"}}, "multicluster.clusterRole"),
    ({"etcd": {"monitoring": "yes"}}, "etcd.monitoring"),
])
def test_invalid_desired_spec_exits_nonzero_naming_the_field(tmp_path: Path, bad: dict, field: str) -> None:
    cc = copy.deepcopy(DEFAULT_CC)
    for key, value in bad.items():
        cc["spec"][key] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cc))
    rc, out, err = plan("--desired", path, "-o", "json")
    assert rc != 0 and out is None
    assert field in err


def test_malformed_yaml_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("spec: [unclosed\n")
    rc, _, err = plan("--desired", path, "-o", "json")
    assert rc == 2 and "cannot read YAML" in err


def test_secret_changes_are_redacted(tmp_path: Path) -> None:
    last = _cc(tmp_path, "last", authentication={"jwtSecret": "old-secret-value"})
    desired = _cc(tmp_path, "desired", authentication={"jwtSecret": "new-secret-value"})
    rc, out, _ = plan("--desired", desired, "--last-applied", last, "-o", "json")
    assert rc == 0
    text = json.dumps(out)
    assert "secret-value" not in text
    assert "authentication.jwtSecret: <redacted> -> <redacted>" in out["changes"]["ks-core"]


def test_a_trimmed_cc_keeps_what_is_installed_and_says_why(tmp_path: Path) -> None:
    last = _cc(tmp_path, "last", logging={"enabled": True}, gatekeeper={"enabled": True})
    trimmed = copy.deepcopy(DEFAULT_CC)
    del trimmed["spec"]["logging"], trimmed["spec"]["gatekeeper"]
    desired = tmp_path / "trimmed.yaml"
    desired.write_text(yaml.safe_dump(trimmed))
    rc, out, _ = plan("--desired", desired, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert out["uninstall"] == []
    assert out["notes"]["gatekeeper"] == ("kept: spec.gatekeeper.enabled is absent (last applied: true); "
                                          "set gatekeeper.enabled: false to uninstall")
    assert out["notes"]["opensearch"].startswith("kept: spec.logging.enabled is absent")
    assert set(out["notes"]) == {"fluentbit", "gatekeeper", "logging", "opensearch"}
    text = subprocess.run([*ENGINE, "plan", "--desired", str(desired), "--last-applied",
                           str(last)], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert "  logging: kept: spec.logging.enabled is absent" in text


def test_only_an_explicit_switch_uninstalls(tmp_path: Path) -> None:
    key = {"authentication__jwtSecret": "the-host-s-key"}  # a member has the host's
    last = _cc(tmp_path, "last", logging={"enabled": True}, multicluster={"clusterRole": "member"}, **key)
    desired = _cc(tmp_path, "off", logging={"enabled": False}, multicluster={"clusterRole": "none"}, **key)
    rc, out, _ = plan("--desired", desired, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert sorted(out["uninstall"]) == ["fluentbit", "logging", "opensearch"]
    assert out["notes"] == {}


@pytest.mark.parametrize("text, words", [
    (b"spec:\n  multicluster:\n    clusterRole: host\n    clusterRole: none\n", "found the key 'clusterRole' twice"),
    (b"spec:\n  local_registry: \xff\xfe\n", "cannot read YAML"),
])
def test_the_plan_cli_refuses_what_the_api_server_would(tmp_path: Path, text: bytes, words: str) -> None:
    path = tmp_path / "cc.yaml"
    path.write_bytes(text)
    rc, out, err = plan("--desired", path, "-o", "json")
    assert rc == 2 and out is None and words in err and "Traceback" not in err


MARKER = "marker-0f3a9c"


@pytest.mark.parametrize("text, where", [
    (f"spec:\n  authentication:\n    jwtSecret: {MARKER}-1\n    jwtSecret: {MARKER}-2\n",
     "line 4, column 5: found the key 'jwtSecret' twice (spec.authentication.jwtSecret)"),
    (f"spec:\n  authentication:\n    jwtSecret: {MARKER}: x\n", "line 3, column"),
    (f'spec:\n  authentication: {{jwtSecret: "{MARKER}\n',
     "line 2, column 31: while scanning a quoted scalar; line 3, column 1: found unexpected end of stream"),
], ids=["duplicate key", "scanner error", "unterminated string"])
def test_a_yaml_error_names_the_line_without_quoting_it(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "cc.yaml"
    path.write_text(text)
    proc = subprocess.run([*ENGINE, "plan", "--desired", str(path)],
                          capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: {path}: cannot read YAML: ") and where in proc.stderr
    assert MARKER not in proc.stderr and "Traceback" not in proc.stderr


def test_plan_shows_migrations_and_warnings(tmp_path: Path) -> None:
    legacy = cc_with()
    legacy["spec"]["console"] = {"enableMultiLogin": True, "port": 30881}  # pre-3.0 place of the console settings
    del legacy["spec"]["common"]["core"]["console"]
    legacy["spec"]["logging"] = {"enabled": True}
    legacy["spec"]["common"]["es"] = {"enabled": True}
    path = tmp_path / "legacy.yaml"
    path.write_text(yaml.safe_dump(legacy))
    rc, out, _ = plan("--desired", path, "-o", "json")
    assert rc == 0
    assert "moved console -> common.core.console" in out["migrations"]
    assert any("ships no Elasticsearch server" in w for w in out["warnings"])
    text = subprocess.run([*ENGINE, "plan", "--desired", str(path)],
                          capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert "migrated: moved console -> common.core.console" in text and "warning: logging writes" in text


def test_an_error_under_a_moved_key_names_what_the_user_wrote(tmp_path: Path) -> None:
    legacy = cc_with()
    legacy["spec"]["console"] = {"port": "abc"}
    del legacy["spec"]["common"]["core"]["console"]
    path = tmp_path / "legacy.yaml"
    path.write_text(yaml.safe_dump(legacy))
    rc, _, err = plan("--desired", path, "-o", "json")
    assert rc == 2
    assert 'console.port (moved to common.core.console.port): must be a NodePort (integer 30000-32767); ' \
           'got string "abc"' in err


def test_removing_the_external_s3_brings_minio_back(tmp_path: Path) -> None:
    store = {"store": {"enabled": True}}
    last = _cc(tmp_path, "last", openpitrix=store, common__s3={"endpoint": "https://s3.example.com",
                                                               "accessKeyID": "ak", "secretAccessKey": "sk"})
    desired = _cc(tmp_path, "desired", openpitrix=store)  # common.s3 removed
    rc, out, _ = plan("--desired", desired, "--last-applied", last, "-o", "json")
    assert rc == 0
    assert "minio" in out["install"] and "minio" not in out["notes"]


def test_offline_plan_says_a_host_change_depends_on_joined_members(tmp_path: Path) -> None:
    """Leaving the host role is refused while member clusters are joined, which only the cluster knows: the plan
    made without it says so beside the uninstall it shows; other role changes get no such caveat."""
    host = _cc(tmp_path, "host", multicluster={"clusterRole": "host"})
    rc, out, _ = plan("--last-applied", host, "--desired", _cc(tmp_path, "none"), "-o", "json")
    assert rc == 0
    assert any(w.startswith('multicluster.clusterRole: "host" -> "none" will be refused if member clusters are '
                            "joined") for w in out["warnings"]), out["warnings"]
    rc, out, _ = plan("--last-applied", _cc(tmp_path, "none"), "--desired", host, "-o", "json")
    assert rc == 0 and not any("member clusters" in w for w in out["warnings"]), out["warnings"]


def test_plan_prints_no_credential_of_a_free_form_section(tmp_path: Path) -> None:
    providers = [{"name": "corp", "type": "OIDCIdentityProvider", "provider": {
        "privateKey": "pk-canary", "apiKey": "ak-canary", "credentials": {"pass": "pass-canary"}}}]
    last = _cc(tmp_path, "last")
    desired = _cc(tmp_path, "desired", authentication={"oauthOptions": {"identityProviders": providers}})
    for output in ("json", "text"):
        proc = subprocess.run([*ENGINE, "plan", "--desired", str(desired), "--last-applied",
                               str(last), "-o", output], capture_output=True, text=True, cwd=REPO, check=False)
        assert proc.returncode == 0, proc.stderr
        assert "canary" not in proc.stdout + proc.stderr and "authentication.oauthOptions" in proc.stdout


def test_offline_objects_follow_the_chosen_kubernetes_version(tmp_path: Path) -> None:
    """``plan --objects --offline --kubernetes-version``: the objects that differ by version as a cluster of that
    version gets them (PodDisruptionBudgets policy/v1beta1 before 1.25, no kubesphere-sa-token before 1.24)."""
    cc = _cc(tmp_path, "default")
    seen = {}
    for version in ("v1.21.14", "v1.26.15"):
        proc = subprocess.run([*ENGINE, "plan", "--objects", "--offline", "--desired", str(cc), "--kubernetes-version",
                               version, "-o", "yaml"], capture_output=True, text=True, cwd=REPO, check=False,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
        assert proc.returncode == 1, proc.stderr[-2000:]
        docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
        seen[version] = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    old, new = seen["v1.21.14"], seen["v1.26.15"]
    assert old["PodDisruptionBudget", "prometheus-k8s"]["apiVersion"] == "policy/v1beta1"
    assert new["PodDisruptionBudget", "prometheus-k8s"]["apiVersion"] == "policy/v1"
    assert ("Secret", "kubesphere-sa-token") not in old and "secrets" not in old["ServiceAccount", "kubesphere"]
    assert ("Secret", "kubesphere-sa-token") in new
    assert new["ServiceAccount", "kubesphere"]["secrets"] == [{"name": "kubesphere-sa-token"}]
    code, _, err = plan("--objects", "--offline", "--desired", cc, "--kubernetes-version", "1.21")
    assert code == 2 and "--kubernetes-version: not a Kubernetes version: '1.21'" in err
