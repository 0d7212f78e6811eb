"""``python -m installer plan --objects`` on the simulated cluster, over the default platform.

Against the cluster: re-rendering every platform module (``--all``) finds every object as it was applied (the render
is what the modules applied: exit 0, nothing printed); an edit of one field of one Deployment shows exactly that
field; disabling redis lists its objects as deleted and its volume (and password) as kept, and the uninstall then
deletes exactly those. Offline: the render of each installed module (the platform's and redis) names exactly the
objects the module applied, each with the applied digest the cluster's copy carries (the one render path).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_objects import delete_quietly
from installer_state import cc_with
from kubernetes import client
from render_check import render_differences

from .conftest import PLATFORM, Installer, between_cleanups, stored_state

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
REPO = Path(__file__).resolve().parents[2]
NS = "kubesphere-system"


def plan_objects(installer: Installer, *args: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    proc = installer.cli("plan", "--objects", *args)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def _clean_redis(api: client.ApiClient) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    delete_quietly(lambda: apps.delete_namespaced_deployment("redis", NS),
                   lambda: core.delete_namespaced_secret("redis-secret", NS),
                   lambda: core.delete_namespaced_persistent_volume_claim("redis-pvc", NS))


@pytest.fixture
def platform_only(installer: Installer) -> Iterator[Installer]:
    yield from between_cleanups(installer, _clean_redis)


def test_rerendering_every_platform_module_changes_nothing(installer: Installer) -> None:
    """``--all`` re-runs (renders) every enabled module: each object is what the module applied, so nothing shows."""
    rc, out, err, seconds = plan_objects(installer, "--all", "-o", "json")
    print(f"plan --objects --all (default modules, against the cluster): {seconds:.1f}s")
    assert rc == 0, f"{out[-3000:]}\n{err[-3000:]}"
    plan = json.loads(out)
    assert sorted(m["module"] for m in plan["modules"]) == sorted(PLATFORM)
    # Nothing but what is: unchanged objects, and volumes an earlier test's module kept when it stopped rendering
    # them (grafana's, after an all-modules install went back to the platform) listed as kept.
    actions = {(o["action"], o["object"].split("/")[0]) for m in plan["modules"] for o in m["objects"]}
    assert actions <= {("unchanged", kind) for _, kind in actions} | {("kept", "PersistentVolumeClaim")}, actions
    # A no-op edit (the spec written again with a comment-only difference: the same values) changes nothing.
    installer.apply_cc()
    rc, out, err, _ = plan_objects(installer)
    assert (rc, out) == (0, "no changes: no module would run\n"), err[-3000:]


def test_an_edit_of_one_deployment_field_shows_exactly_that_field(installer: Installer, tmp_path: Path) -> None:
    live = client.AppsV1Api(installer.api).read_namespaced_deployment("ks-apiserver", NS)
    resources = installer.api.sanitize_for_serialization(live.spec.template.spec.containers[0].resources)
    old = resources["limits"]["cpu"]
    resources["limits"]["cpu"] = "7"
    edited = cc_with(common__core={**cc_with()["spec"]["common"]["core"], "apiserver": {"resources": resources}})
    # Reviewed before the edit (kubectl diff -f style): the edited cc against the cluster, nothing applied.
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump(edited))
    rc, out, err, _ = plan_objects(installer, "--desired", str(path), "-o", "json")
    assert rc == 1, f"{out[-3000:]}\n{err[-3000:]}"
    preview = {(m["module"], o["object"]): o["fields"] for m in json.loads(out)["modules"] for o in m["objects"]
               if o["action"] != "unchanged"}
    assert client.AppsV1Api(installer.api).read_namespaced_deployment("ks-apiserver", NS).metadata.generation == \
        live.metadata.generation
    installer.put_spec(edited["spec"])
    rc, out, err, _ = plan_objects(installer, "-o", "json")
    assert rc == 1, f"{out[-3000:]}\n{err[-3000:]}"
    changed = {(m["module"], o["object"]): o["fields"] for m in json.loads(out)["modules"] for o in m["objects"]
               if o["action"] != "unchanged"}
    field = "spec.template.spec.containers[ks-apiserver].resources.limits.cpu"
    assert changed == preview == {("ks-core", f"Deployment/{NS}/ks-apiserver"): [f'{field}: "{old}" -> "7"']}
    rc, text, _, _ = plan_objects(installer)
    assert rc == 1
    assert text.splitlines()[:3] == ["ks-core (upgrade)", f"  ~ Deployment {NS}/ks-apiserver",
                                     f'      {field}: "{old}" -> "7"']


def test_a_jwt_secret_in_the_spec_previews_the_key_and_token_the_run_changes(installer: Installer,
                                                                             tmp_path: Path) -> None:
    """ks-core's credential task previews through the run's own decision: a JWT key set in the spec changes the
    Secret's ``secret`` and so its ``token`` (by key name, never a value); the admin exists, so nothing else; nothing
    is written."""
    core = client.CoreV1Api(installer.api)
    before = core.read_namespaced_secret("kubesphere-secret", NS)
    chosen = "A-jwt-key-chosen-for-the-preview-0123456789"
    path = tmp_path / "jwt.yaml"
    path.write_text(yaml.safe_dump(cc_with(authentication={"jwtSecret": chosen})))
    rc, out, err, _ = plan_objects(installer, "--desired", str(path), "-o", "json")
    assert rc == 1, f"{out[-3000:]}\n{err[-3000:]}"
    secret = [(o["action"], o["fields"]) for m in json.loads(out)["modules"] for o in m["objects"]
              if o["object"] == f"Secret/{NS}/kubesphere-secret"]
    assert secret == [("update", ["data.secret: changed", "data.token: changed"])]
    assert not any(o["object"] == "User/admin" for m in json.loads(out)["modules"] for o in m["objects"])
    assert chosen not in out + err
    after = core.read_namespaced_secret("kubesphere-secret", NS)
    assert after.metadata.resource_version == before.metadata.resource_version


def test_disabling_a_module_lists_its_objects_deleted_and_its_volume_kept(platform_only: Installer) -> None:
    installer = platform_only
    installer.apply_cc(common__redis={"enabled": True})
    assert "redis" in installer.reconcile_ok()
    installer.apply_cc(common__redis={"enabled": False})
    rc, out, err, _ = plan_objects(installer, "-o", "json")
    assert rc == 1, f"{out[-3000:]}\n{err[-3000:]}"
    (redis,) = [m for m in json.loads(out)["modules"] if m["module"] == "redis"]
    assert redis["action"] == "uninstall"
    by_action: dict[str, dict[str, str]] = {}
    for o in redis["objects"]:
        by_action.setdefault(o["action"], {})[o["object"]] = o["note"]
    assert set(by_action) == {"delete", "kept"}
    assert set(by_action["delete"]) == {f"ConfigMap/{NS}/redis-configmap", f"Deployment/{NS}/redis",
                                        f"Service/{NS}/redis"}
    assert by_action["kept"] == {f"PersistentVolumeClaim/{NS}/redis-pvc":
                                 "kept on uninstall; a purge annotation would delete it",
                                 f"Secret/{NS}/redis-secret":
                                     "installer.kubesphere.io/prune: disabled; a purge annotation would delete it"}
    text = plan_objects(installer)[1]
    print(text)
    assert f"  - Deployment {NS}/redis" in text and f"  = PersistentVolumeClaim {NS}/redis-pvc" in text
    # The uninstall deletes exactly what the plan said.
    before = set(installer.module_objects().get("redis", {}))
    installer.reconcile_ok()
    assert before - set(installer.module_objects().get("redis", {})) == set(by_action["delete"])


def test_offline_render_is_what_each_module_applied(platform_only: Installer, tmp_path: Path) -> None:
    """The default modules and redis: the offline render is what they applied (tests/render_check.py; every module
    is checked after test_parity's all-modules install)."""
    installer = platform_only
    installer.apply_cc(common__redis={"enabled": True})
    assert "redis" in installer.reconcile_ok()
    started = time.monotonic()
    differences = render_differences(installer.api, installer.environ(), tmp_path, installer.cc()["spec"],
                                     stored_state(installer), [*sorted(PLATFORM), "redis"])
    print(f"offline render of {len(PLATFORM) + 1} modules, twice, compared: {time.monotonic() - started:.1f}s")
    assert not differences, differences
