"""What shell-operator writes to its binding-context temp files holds no credential of the state Secret: its
binding keeps only a jq filter's result (resourceVersion, and data without credentials), never the object, and the
hook's fast path decides from that result alone. A run's Ansible temp dirs stay in its private data dir."""

from __future__ import annotations

import base64
import copy
import json
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from installer_state import DEFAULT_CC

from installer import hook
from installer.config import prepare
from installer.config.secrets import SECRET_PATHS
from installer.engine import welcome_box
from installer.engine.fastpath import PATCH_ENV
from installer.engine.fingerprint import DigestCache
from installer.engine.plan import Action, Step, records_for
from installer.engine.runner import PlaybookRunner, clean_run_dirs
from installer.engine.state_codec import encode
from installer.engine.status import Phase
from installer.engine_settings import Settings
from installer.modules import MODULES, switch_paths
from installer.spec import merge, nested

REPO = Path(__file__).resolve().parents[2]
REVISION = "4242"
OLD_STAMP = "2020-01-02 03:04:05"
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="shell-operator's jq binary is not installed")


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("KS_BASE_DIR", str(tmp_path))
    monkeypatch.delenv("KS_PLAYBOOKS_DIR", raising=False)
    monkeypatch.setenv("KS_ROLES_DIR", str(REPO / "roles"))
    monkeypatch.setenv(PATCH_ENV, str(tmp_path / "patch.jsonl"))
    return Settings.from_env()


def _spec() -> dict[str, Any]:
    return prepare(copy.deepcopy(DEFAULT_CC["spec"]), None, switch_paths()).spec


def _secret(settings: Settings, spec: dict[str, Any]) -> dict[str, Any]:
    """The state Secret as the API returns it after every enabled module was installed from ``spec``."""
    files = DigestCache(settings.digest_cache, settings.roles_dir)
    # Each record holds what its run wrote, credential-named objects among them (their names are no credential).
    objects = {"v1|Secret|kubesphere-system|kubesphere-secret": ("0f1e2d3c-aaaa-bbbb-cccc-000000000001", "a" * 32),
               "v1|Secret|kubesphere-system|redis-password": ("0f1e2d3c-aaaa-bbbb-cccc-000000000002", "b" * 32)}
    records = {name: replace(r, objects=objects) for name, r in records_for(spec, files).items()}
    data = {"_spec": encode(spec), **{name: encode(r.to_dict()) for name, r in records.items()}}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
            "metadata": {"name": "ks-installer-state", "namespace": "kubesphere-system", "resourceVersion": REVISION}}


def _cc(spec: dict[str, Any]) -> dict[str, Any]:
    """The cc after a Ready reconcile of ``spec``, edited since (a new generation) without changing anything."""
    enabled = {m.name: {"phase": Phase.INSTALLED} for m in MODULES if m.enabled(spec)}
    conditions = [{"type": "Ready", "status": "True", "message": "ready", "observedGeneration": 1},
                  {"type": "Stalled", "status": "False"}, {"type": "Reconciling", "status": "False"}]
    status = {"conditions": conditions, "modules": enabled, "stateRevision": REVISION, "observedGeneration": 1}
    return {"metadata": {"name": "ks-installer", "generation": 2}, "spec": copy.deepcopy(DEFAULT_CC["spec"]),
            "status": status}


def _box(settings: Settings) -> str:
    """The welcome box an earlier full reconcile of this pod wrote."""
    text = welcome_box.render("http://172.31.0.1:30880", "Password: P@88w0rd", OLD_STAMP)
    welcome_box.save(settings.running_file, text)
    return text


def _jq(secret: dict[str, Any]) -> Any:
    """The state binding's filterResult for ``secret``, as shell-operator computes it (the jq binary)."""
    proc = subprocess.run(["jq", hook.state_filter()], input=json.dumps(secret), capture_output=True, text=True,
                          check=True, timeout=30)
    return json.loads(proc.stdout)


def _contexts(cc: dict[str, Any], result: Any) -> list[dict[str, Any]]:
    return [{"binding": hook.SPEC_BINDING, "type": "Event", "watchEvent": "Modified",
             "snapshots": {hook.SPEC_BINDING: [{"object": cc, "filterResult": cc["spec"]}],
                           hook.STATE_BINDING: [{"filterResult": result}]}}]


def test_the_state_binding_gets_the_filter_result_only() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "hooks" / "kubesphere" / "installRunner.py"), "--config"],
                          capture_output=True, text=True, timeout=60, check=True)
    (state,) = [b for b in json.loads(proc.stdout)["kubernetes"] if b["name"] == hook.STATE_BINDING]
    assert state["jqFilter"] == hook.state_filter()
    assert state["keepFullObjectsInMemory"] is False  # shell-operator drops `object` from snapshots and contexts
    assert (state["executeHookOnEvent"], state["executeHookOnSynchronization"]) == ([], False)


@needs_jq
def test_a_settled_state_is_kept_whole_and_the_fast_path_decides_from_it(settings: Settings,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    spec = _spec()
    secret = _secret(settings, spec)
    result = _jq(secret)
    assert result == {"resourceVersion": REVISION, "data": secret["data"]}  # a published default is no secret
    before = _box(settings)

    with caplog.at_level("INFO", logger="installer"):
        assert hook._settled(_contexts(_cc(spec), result), {hook.SPEC_BINDING})
    (op,) = [json.loads(line) for line in Path(settings.base_dir / "patch.jsonl").read_text().splitlines()]
    assert op["mergePatch"]["status"]["observedGeneration"] == 2
    # The edit's run ends as every run of upstream's: the box, in the log and in kubesphere_running, at this time.
    after = settings.running_file.read_text()
    assert after != before and after == welcome_box.restamped(before, after.splitlines()[-2][-19:])
    assert OLD_STAMP not in after
    lines = [r.getMessage() for r in caplog.records]
    box = lines.index(welcome_box.TITLE) - 1
    assert lines[box:box + len(after.splitlines())] == after.splitlines()
    assert lines[-1].startswith("Reconcile finished, Ready")


@needs_jq
@pytest.mark.parametrize("text", [None, "", "edited by hand\n"], ids=["absent", "empty", "not-a-box"])
def test_without_a_box_of_this_pod_the_full_path_renders_it(text: str | None, settings: Settings) -> None:
    """A new pod (no file yet), or a file that holds no box: the full reconcile renders the box from the cluster."""
    spec = _spec()
    if text is not None:
        welcome_box.save(settings.running_file, text)
    assert not hook._settled(_contexts(_cc(spec), _jq(_secret(settings, spec))), {hook.SPEC_BINDING})
    assert not (settings.base_dir / "patch.jsonl").exists()


@pytest.mark.parametrize("result", [{"resourceVersion": REVISION, "data": None}, None,
                                    {"resourceVersion": "1", "data": {}}], ids=["withheld", "none", "stale"])
def test_without_usable_data_the_full_reconcile_decides(result: Any, settings: Settings) -> None:
    _box(settings)
    assert not hook._settled(_contexts(_cc(_spec()), result), {hook.SPEC_BINDING})
    assert not (settings.base_dir / "patch.jsonl").exists()


def _with(spec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    merge(out, nested(path, value))
    return out


@needs_jq
@pytest.mark.parametrize("path", [*SECRET_PATHS, "authentication.oauthOptions.clientSecret",
                                  "common.es.basicAuth.Token", "devops.jenkinsPassword"])
def test_a_credential_in_the_last_spec_withholds_the_data(path: str, settings: Settings) -> None:
    secret = _secret(settings, _spec())
    secret["data"]["_spec"] = encode(_with(_spec(), path, "s3cr3t-value"))
    assert _jq(secret) == {"resourceVersion": REVISION, "data": None}


@needs_jq
@pytest.mark.parametrize("inputs", [
    {"common": {"s3": {"accessKeyID": "AKIA", "endpoint": "e"}}},
    {"common.s3.secretAccessKey": "sk"},
    {"authentication": {"oauthOptions": {"identityProviders": [{"provider": {"clientSecret": "cs"}}]}}},
    {"common.opensearch": {"basicAuth": {"username": "admin", "password": "not-the-default"}}},
    {"authentication.adminPassword": 12345},
], ids=lambda i: json.dumps(i)[:40])
def test_a_credential_in_a_module_record_withholds_the_data(inputs: dict[str, Any], settings: Settings) -> None:
    secret = _secret(settings, _spec())
    secret["data"]["ks-core"] = encode({"module": "ks-core", "hash": "h", "inputs": inputs})
    assert _jq(secret)["data"] is None


@needs_jq
@pytest.mark.parametrize("inputs", [{"authentication": {"jwtSecret": "", "accessTokenMaxAge": "2h"}},
                                    {"common.opensearch.basicAuth.password": "admin"},
                                    {"authentication.adminPassword": None}], ids=["empty", "default", "null"])
def test_empty_and_published_default_credentials_are_kept(inputs: dict[str, Any], settings: Settings) -> None:
    secret = _secret(settings, _spec())
    secret["data"]["ks-core"] = encode({"module": "ks-core", "hash": "h", "inputs": inputs})
    assert _jq(secret)["data"] == secret["data"]


@needs_jq
@pytest.mark.parametrize("value", ["not base64!", "bm90IGpzb24=", 7])
def test_an_unreadable_entry_withholds_the_data_and_sends_the_schedule_to_the_full_path(
        value: Any, settings: Settings) -> None:
    secret = _secret(settings, _spec())
    secret["data"]["ks-core"] = value
    result = _jq(secret)
    assert result == {"resourceVersion": REVISION, "data": None, "unreadable": True}
    settings.running_file.parent.mkdir(parents=True)
    settings.running_file.write_text("welcome")
    cc = _cc(_spec())
    cc["status"]["lastDriftCheck"] = "2999-01-01T00:00:00Z"  # no drift check due
    tick = [{"binding": hook.SCHEDULE_BINDING, "type": "Schedule", "snapshots": {
        hook.SPEC_BINDING: [{"object": cc, "filterResult": cc["spec"]}],
        hook.STATE_BINDING: [{"filterResult": result}]}}]
    assert not hook._settled(tick, {hook.SCHEDULE_BINDING})  # the full path reports it, as for an edit
    tick[0]["snapshots"][hook.STATE_BINDING] = [{"filterResult": _jq(_secret(settings, _spec()))}]
    assert hook._settled(tick, {hook.SCHEDULE_BINDING})


def _payload_dirs(root: Path) -> list[Path]:
    return sorted(root.glob("**/ansible-tmp-*"))


def test_a_cancelled_run_leaves_no_module_payload(tmp_path: Path) -> None:
    """The module's payload (its arguments: spec values) is written under the run's private data dir, not the
    user's ``~/.ansible/tmp``, and goes with it when the run is cancelled."""
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir()
    (playbooks / "telemetry.yaml").write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.command": {"argv": ["sleep", "60"]}}]}]))
    settings = Settings(base_dir=tmp_path, playbooks_dir=playbooks, roles_dir=REPO / "roles",
                        results_dir=tmp_path / "results", run_dir=tmp_path / "run", max_parallel=1,
                        module_timeout=120, console_timeout=60, drift_interval=0)
    cancel, seen = threading.Event(), []

    def cancel_once_the_module_runs() -> None:
        deadline = time.monotonic() + 60
        while not (found := _payload_dirs(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.extend(found)
        cancel.set()

    watcher = threading.Thread(target=cancel_once_the_module_runs)
    watcher.start()
    outcome = PlaybookRunner(settings, {"secret_value": "s3cr3t"}, cancel).run(Step("telemetry", Action.INSTALL))
    watcher.join()
    assert outcome.status == "canceled"
    assert seen and all(settings.run_dir in p.parents for p in seen), seen
    assert _payload_dirs(tmp_path) == [] and list(settings.run_dir.iterdir()) == []


def test_the_next_reconcile_removes_what_a_killed_run_left(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    payload = run_dir / "ks-core-abc" / "remote-tmp" / "ansible-tmp-1-2" / "AnsiballZ_ks_core_secret.py"
    payload.parent.mkdir(parents=True)
    payload.write_text("ARGS = {'admin_password': 's3cr3t'}")
    (run_dir / "ks-core-abc" / "env").mkdir()
    (run_dir / "ks-core-abc" / "env" / "extravars").write_text("jwtSecret: !unsafe \"s3cr3t\"")
    clean_run_dirs(run_dir)
    assert list(run_dir.iterdir()) == [] and run_dir.stat().st_mode & 0o777 == 0o700


@needs_jq
def test_an_edit_no_module_reads_is_stored_through_the_patch_file(settings: Settings) -> None:
    """Redis is off: its volume size is read by no module. The new spec goes to the state Secret and the status
    records the digest of what the Secret then holds, so the next event is settled from the snapshots too."""
    from installer.engine.state_codec import FORMAT, data_digest

    spec = _spec()
    secret = _secret(settings, spec)
    secret["data"] |= {"_format": encode(FORMAT), "_writer": encode("old")}
    _box(settings)
    cc = _cc(spec)
    cc["spec"] = _with(cc["spec"], "common.redis.volumeSize", "5Gi")
    edited = prepare(copy.deepcopy(cc["spec"]), spec, switch_paths()).spec
    assert edited != spec

    assert hook._settled(_contexts(cc, _jq(secret)), {hook.SPEC_BINDING})
    patch_file = settings.base_dir / "patch.jsonl"
    stored, status = (json.loads(line) for line in patch_file.read_text().splitlines())
    assert (stored["kind"], stored["name"], stored["operation"]) == ("Secret", "ks-installer-state", "MergePatch")
    assert json.loads(base64.b64decode(stored["mergePatch"]["data"]["_spec"])) == edited
    data = secret["data"] | stored["mergePatch"]["data"]
    assert status["mergePatch"]["status"]["stateDigest"] == data_digest(data)
    assert status["mergePatch"]["status"]["observedGeneration"] == 2

    # The next event: the Secret as shell-operator wrote it (a resourceVersion the status never saw).
    after = {**secret, "data": data, "metadata": {**secret["metadata"], "resourceVersion": "4343"}}
    cc["metadata"]["generation"] = 3
    merge(cc["status"], status["mergePatch"]["status"])
    patch_file.unlink()
    # A snapshot of the Secret from before that store (still at the revision the full path recorded) is not the
    # state the status speaks of: the full path decides, and stores the spec against the Secret as it is.
    assert not hook._settled(_contexts(cc, _jq(secret)), {hook.SPEC_BINDING})
    assert not patch_file.exists()
    assert hook._settled(_contexts(cc, _jq(after)), {hook.SPEC_BINDING})
    (refresh,) = (json.loads(line) for line in patch_file.read_text().splitlines())
    assert refresh["mergePatch"]["status"]["observedGeneration"] == 3 and "stateDigest" not in refresh["mergePatch"][
        "status"]

    # A credential no module reads is not written to shell-operator's files: the full path stores it.
    patch_file.unlink()
    cc["spec"] = _with(cc["spec"], "common.mysqlPassword", "s3cr3t-value")  # upstream's, read by none
    assert not hook._settled(_contexts(cc, _jq(after)), {hook.SPEC_BINDING})
    assert not patch_file.exists()
