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
from typing import Any

import pytest
import yaml
from cluster_objects import delete_quietly
from installer_state import cc_with
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from installer import KS_VERSION
from installer.cluster import cluster_facts
from installer.config import prepare
from installer.modules import switch_paths
from installer.object_plan import offline_plan, redacted_manifest
from installer.render import WORLD, render_modules
from installer.settings import APPLIED_ANNOTATION, MODULE_LABEL
from installer.version import INSTALLER_VERSION

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
    assert all(o["action"] == "unchanged" for m in plan["modules"] for o in m["objects"])
    # A no-op edit (the spec written again with a comment-only difference: the same values) prints nothing.
    installer.apply_cc()
    rc, out, err, _ = plan_objects(installer)
    assert (rc, out) == (0, ""), err[-3000:]


def test_an_edit_of_one_deployment_field_shows_exactly_that_field(installer: Installer) -> None:
    live = client.AppsV1Api(installer.api).read_namespaced_deployment("ks-apiserver", NS)
    resources = installer.api.sanitize_for_serialization(live.spec.template.spec.containers[0].resources)
    old = resources["limits"]["cpu"]
    resources["limits"]["cpu"] = "7"
    installer.apply_cc(common__core={**cc_with()["spec"]["common"]["core"], "apiserver": {"resources": resources}})
    rc, out, err, _ = plan_objects(installer, "-o", "json")
    assert rc == 1, f"{out[-3000:]}\n{err[-3000:]}"
    changed = {(m["module"], o["object"]): o["fields"] for m in json.loads(out)["modules"] for o in m["objects"]
               if o["action"] != "unchanged"}
    field = "spec.template.spec.containers[ks-apiserver].resources.limits.cpu"
    assert changed == {("ks-core", f"Deployment/{NS}/ks-apiserver"): [f'{field}: "{old}" -> "7"']}
    rc, text, _, _ = plan_objects(installer)
    assert rc == 1
    assert text.splitlines()[:3] == ["ks-core (upgrade)", f"  ~ Deployment {NS}/ks-apiserver",
                                     f'      {field}: "{old}" -> "7"']


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
                                 f"Secret/{NS}/redis-secret": "a purge annotation would delete it"}
    text = plan_objects(installer)[1]
    print(text)
    assert f"  - Deployment {NS}/redis" in text and f"  = PersistentVolumeClaim {NS}/redis-pvc" in text
    # The uninstall deletes exactly what the plan said.
    before = set(installer.module_objects().get("redis", {}))
    installer.reconcile_ok()
    assert before - set(installer.module_objects().get("redis", {})) == set(by_action["delete"])


def _ref(m: dict[str, Any]) -> tuple[str, str, str, str]:
    return m["apiVersion"], m["kind"], m["metadata"].get("namespace") or "", m["metadata"]["name"]


def _offline(installer: Installer, tmp_path: Path, spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Module → the manifests ``plan --objects --desired`` (no cluster: no kubeconfig) renders for ``spec``."""
    cc = tmp_path / "cc.yaml"
    cc.write_text(yaml.safe_dump({**cc_with(), "spec": spec}))
    rc, out, err, seconds = plan_objects(installer, "--desired", str(cc), "-o", "yaml")
    print(f"plan --objects --desired (offline, {len(spec)} spec keys): {seconds:.1f}s")
    assert rc == 1, err[-3000:]
    out_by_module: dict[str, list[dict[str, Any]]] = {}
    for doc in yaml.safe_load_all(out):
        out_by_module.setdefault(doc["metadata"]["labels"][MODULE_LABEL], []).append(doc)
    return out_by_module


def test_offline_render_is_what_each_module_applied(platform_only: Installer, tmp_path: Path) -> None:
    """Each installed module's recorded inventory holds exactly the objects the offline render (``plan --objects
    --desired``) names, but the namespaces that exist on every cluster (a module labels them, it does not own them);
    and the offline render with the cluster's facts (node count, version: an offline render cannot know them) makes
    of each object the manifest whose digest the cluster's copy carries, but those that hold a credential the
    cluster generated (a JWT key, a CA bundle)."""
    installer = platform_only
    installer.apply_cc(common__redis={"enabled": True})
    assert "redis" in installer.reconcile_ok()
    spec = installer.cc()["spec"]
    rendered = _offline(installer, tmp_path, spec)
    state = stored_state(installer)
    preexisting = {n["metadata"]["name"] for n in WORLD["Namespace"]}
    modules = (*sorted(PLATFORM), "redis")
    for module in modules:
        owned = [m for m in rendered[module] if not (m["kind"] == "Namespace" and m["metadata"]["name"] in preexisting)]
        applied = {_ref(m) for m in owned if APPLIED_ANNOTATION in m["metadata"].get("annotations", {})}
        inventory = {tuple(r) for r in state[module]["inventory"]}
        # Every applied object is in the inventory; so may be the Secrets the module's generators write.
        assert applied <= inventory <= {_ref(m) for m in owned}, module

    prepared = prepare(spec, None, switch_paths())
    variables = {**prepared.spec, **cluster_facts(installer.api), "ks_version": KS_VERSION,
                 "ks_installer_version": INSTALLER_VERSION, "ks_namespace": NS}
    with_facts = offline_plan(render_modules([(m, "install", "") for m in modules], variables, REPO / "playbooks",
                                             REPO / "roles", world=WORLD), dict.fromkeys(modules, "install"))
    dyn = DynamicClient(installer.api)
    for module in with_facts.modules:
        differ = []
        for m in module.manifests:
            if APPLIED_ANNOTATION not in m["metadata"].get("annotations", {}) or "(generated)" in json.dumps(
                    redacted_manifest(m)) or (m["kind"] == "Namespace" and m["metadata"]["name"] in preexisting):
                continue
            live = dyn.resources.get(api_version=m["apiVersion"], kind=m["kind"]).get(
                name=m["metadata"]["name"], namespace=m["metadata"].get("namespace"))
            if (live.metadata.annotations or {}).get(APPLIED_ANNOTATION) != m["metadata"]["annotations"][
                    APPLIED_ANNOTATION]:
                differ.append("/".join(_ref(m)[1:]))
        assert not differ, f"{module.module}: the offline render differs from what was applied: {differ}"
