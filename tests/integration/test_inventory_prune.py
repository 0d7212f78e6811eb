"""What a module owns is its recorded inventory: after a successful run the engine deletes what the recorded inventory
has and the run's lacks (and ``plan --objects`` shows it first), a failed run deletes nothing, an uninstall deletes the
recorded inventory; PVCs, generated credentials and what a user took over (no module label) are never deleted."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from cluster_objects import delete_quietly
from kubernetes import client

from installer.engine.state import StateStore
from installer.objects.change_set import Foreseen
from installer.objects.manifests import Manifests
from installer.objects.random_secret import ensure_random_secret
from installer.objects.refs import ref_of
from installer.preview.foresight import Foresight
from installer.settings import MODULE_LABEL, NAMESPACE, PRUNE_ANNOTATION, PRUNE_DISABLED, SSA_ANNOTATION

from .conftest import Installer, playbooks_changed, stored_state

pytestmark = pytest.mark.cluster


def _config(ns: str, name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}}


def _made_once(obj: dict) -> dict:
    """``obj`` as a role renders an object it makes once (roles/kubesphere-defaults' ks_made_once)."""
    obj["metadata"]["annotations"] = {SSA_ANNOTATION: "IfNotPresent"}
    return obj


def test_prune_and_uninstall_go_by_the_recorded_inventory_through_the_deletion_policy(
        kube_api: client.ApiClient) -> None:
    tag = uuid.uuid4().hex[:6]
    ns, module = f"t-inv-{tag}", f"mod-{tag}"
    core = client.CoreV1Api(kube_api)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": ns},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    objects = [namespace, _config(ns, "dropped"), _config(ns, "handed-over"), claim]
    manifests, preview = Manifests(kube_api, module), Foresight(kube_api, module, Foreseen())
    try:
        applied = manifests.apply(objects)
        # A generated credential, kept on uninstall by its policy annotation (what a role asks of its generator).
        ensure_random_secret(kube_api, ns, "password", "key", module, annotations={PRUNE_ANNOTATION: PRUNE_DISABLED})
        recorded = [*applied.applied_refs, ("v1", "Secret", ns, "password")]
        # A user takes one object over (the module's label removed) and makes one of their own.
        core.patch_namespaced_config_map("handed-over", ns, {"metadata": {"labels": {MODULE_LABEL: None}}})
        core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="users")))
        recorded.append(("v1", "ConfigMap", ns, "users"))  # even if a record named it

        current = [ref_of(namespace)]  # the next run makes only the namespace
        foreseen = {(c.ref, c.action) for c in preview.prune_inventory(recorded, current).changes}
        assert foreseen == {(f"ConfigMap/{ns}/dropped", "delete"), (f"PersistentVolumeClaim/{ns}/data", "kept"),
                            (f"Secret/{ns}/password", "kept")}
        assert core.read_namespaced_config_map("dropped", ns)  # a dry run deletes nothing

        pruned = manifests.prune_inventory(recorded, current)
        assert pruned.deleted == [f"ConfigMap/{ns}/dropped"]
        assert sorted(r[1] for r in pruned.survivors) == ["PersistentVolumeClaim", "Secret"]  # still the module's
        names = {c.metadata.name for c in core.list_namespaced_config_map(ns).items}
        assert {"handed-over", "users"} <= names and "dropped" not in names

        # Uninstall: the recorded inventory, keeping the annotated credential; the namespace holds the PVC, so stays.
        gone = manifests.uninstall(recorded, timeout=60)
        assert gone.deleted == [] and sorted(gone.kept) == [f"Namespace/{ns} (holds PersistentVolumeClaims)",
                                                            f"PersistentVolumeClaim/{ns}/data",
                                                            f"Secret/{ns}/password ({PRUNE_ANNOTATION}: disabled)"]
        assert core.read_namespaced_secret("password", ns) and core.read_namespaced_config_map("users", ns)

        # A purge deletes the credential and the volume too, and the namespace with them.
        purged = manifests.uninstall(recorded, purge=True, timeout=60)
        assert {f"Secret/{ns}/password", f"PersistentVolumeClaim/{ns}/data", f"Namespace/{ns}"} <= set(purged.deleted)
    finally:
        delete_quietly(lambda: core.delete_namespace(ns))


@pytest.mark.platform
def test_a_dropped_object_goes_after_the_next_successful_run_not_after_a_failed_one(
        installer: Installer, tmp_path: Path) -> None:
    core = client.CoreV1Api(installer.api)
    extra = {"name": "Test | Apply ConfigMaps of an earlier version",
             "ks_manifest": {"module": "ks-config", "definition": [_config(NAMESPACE, "test-dropped"),
                                                                   _config(NAMESPACE, "test-handed-over")]}}
    partial = {"name": "Test | Apply a ConfigMap, then fail",
               "ks_manifest": {"module": "ks-config", "definition": [_config(NAMESPACE, "test-failed-run")]}}
    fail = {"name": "Test | Fail after the apply", "ansible.builtin.fail": {"msg": "failing on purpose"}}
    for name in ("with", "failing"):
        (tmp_path / name).mkdir()
    try:
        installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path / "with", "ks-config", post_tasks=[extra]))
        assert "ks-config" in installer.reconcile_ok()
        assert ["v1", "ConfigMap", NAMESPACE, "test-dropped"] in stored_state(installer)["ks-config"]["inventory"]
        core.patch_namespaced_config_map("test-handed-over", NAMESPACE, {"metadata": {"labels": {MODULE_LABEL: None}}})

        installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path / "failing", "ks-config",
                                                                     post_tasks=[partial, fail]))
        proc = installer.reconcile()
        assert proc.returncode == 1 and installer.status()["modules"]["ks-config"]["phase"] == "Failed", \
            proc.stderr[-3000:]
        assert core.read_namespaced_config_map("test-dropped", NAMESPACE)  # a failed run prunes nothing
        # What the failed run applied joins the recorded inventory, so the next successful run prunes it too.
        assert ["v1", "ConfigMap", NAMESPACE, "test-failed-run"] in stored_state(installer)["ks-config"]["inventory"]

        del installer.env["KS_PLAYBOOKS_DIR"]
        plan = installer.cli("plan", "--objects", "-o", "json")
        shown = {o["object"]: (o["action"], o["note"]) for m in json.loads(plan.stdout)["modules"]
                 if m["module"] == "ks-config" for o in m["objects"]}
        assert shown.get(f"ConfigMap/{NAMESPACE}/test-dropped") == ("delete", "no longer rendered (pruned)"), \
            plan.stdout[-3000:]
        assert f"ConfigMap/{NAMESPACE}/test-handed-over" not in shown

        assert "ks-config" in installer.reconcile_ok()
        names = {c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items}
        assert "test-dropped" not in names and "test-failed-run" not in names and "test-handed-over" in names
        assert ["v1", "ConfigMap", NAMESPACE, "test-dropped"] not in stored_state(installer)["ks-config"]["inventory"]
    finally:
        installer.env.pop("KS_PLAYBOOKS_DIR", None)
        delete_quietly(lambda: core.delete_namespaced_config_map("test-dropped", NAMESPACE),
                       lambda: core.delete_namespaced_config_map("test-failed-run", NAMESPACE),
                       lambda: core.delete_namespaced_config_map("test-handed-over", NAMESPACE))


@pytest.mark.platform
def test_an_install_prunes_what_an_earlier_installation_left_when_its_record_was_lost(
        installer: Installer, tmp_path: Path) -> None:
    core = client.CoreV1Api(installer.api)
    extra = {"name": "Test | Apply a ConfigMap of an earlier installation",
             "ks_manifest": {"module": "ks-config", "definition": [_config(NAMESPACE, "test-left-behind")]}}
    (tmp_path / "with").mkdir()
    try:
        installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path / "with", "ks-config", post_tasks=[extra]))
        assert "ks-config" in installer.reconcile_ok()
        del installer.env["KS_PLAYBOOKS_DIR"]
        # The module's record is lost (the state Secret restored from before it, or deleted): no inventory names
        # the ConfigMap, and the module's next run is an install.
        StateStore(installer.api).forget("ks-config")

        plan = installer.cli("plan", "--objects", "-o", "json")
        shown = {o["object"]: (o["action"], o["note"]) for m in json.loads(plan.stdout)["modules"]
                 if m["module"] == "ks-config" for o in m["objects"]}
        assert shown.get(f"ConfigMap/{NAMESPACE}/test-left-behind") == ("delete", "no longer rendered (pruned)"), \
            plan.stdout[-3000:]

        proc = installer.reconcile()
        assert proc.returncode == 0 and "Start installing ks-config" in proc.stderr, proc.stderr[-3000:]
        assert "test-left-behind" not in {c.metadata.name for c in core.list_namespaced_config_map(NAMESPACE).items}
        assert f"pruned what it no longer makes: ConfigMap/{NAMESPACE}/test-left-behind" in proc.stderr
        inventory = stored_state(installer)["ks-config"]["inventory"]
        assert ["v1", "ConfigMap", NAMESPACE, "kubesphere-config"] in inventory
        assert ["v1", "ConfigMap", NAMESPACE, "test-left-behind"] not in inventory
    finally:
        installer.env.pop("KS_PLAYBOOKS_DIR", None)
        delete_quietly(lambda: core.delete_namespaced_config_map("test-left-behind", NAMESPACE))


@pytest.mark.platform
def test_an_object_made_once_stays_as_its_users_left_it_and_the_module_s(installer: Installer, tmp_path: Path) -> None:
    core = client.CoreV1Api(installer.api)
    once = {"name": "Test | Create ConfigMaps once",
            "ks_manifest": {"module": "ks-config", "definition": [_made_once(_config(NAMESPACE, "test-once")),
                                                                  _made_once(_config(NAMESPACE, "test-once-users"))]}}
    later = {"name": "Test | A task of a later version", "ansible.builtin.debug": {"msg": "a later version"}}
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    try:
        # One of the two is there already, made by a user: it is left as it is, and never becomes the module's.
        core.create_namespaced_config_map(NAMESPACE, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="test-once-users"), data={"k": "users"}))
        installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path / "first", "ks-config", post_tasks=[once]))
        assert "ks-config" in installer.reconcile_ok()
        assert core.read_namespaced_config_map("test-once", NAMESPACE).metadata.labels[MODULE_LABEL] == "ks-config"
        users = core.read_namespaced_config_map("test-once-users", NAMESPACE)
        assert users.data == {"k": "users"} and MODULE_LABEL not in (users.metadata.labels or {})
        core.patch_namespaced_config_map("test-once", NAMESPACE, {"data": {"k": "edited"}})  # a user's change

        installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_changed(tmp_path / "second", "ks-config",
                                                                  post_tasks=[once, later]))
        assert "ks-config" in installer.reconcile_ok()
        # Not applied again (the user's change stays), and not pruned: still in the module's inventory.
        assert core.read_namespaced_config_map("test-once", NAMESPACE).data == {"k": "edited"}
        inventory = stored_state(installer)["ks-config"]["inventory"]
        assert ["v1", "ConfigMap", NAMESPACE, "test-once"] in inventory
        assert ["v1", "ConfigMap", NAMESPACE, "test-once-users"] not in inventory
    finally:
        installer.env.pop("KS_PLAYBOOKS_DIR", None)
        for name in ("test-once", "test-once-users"):
            delete_quietly(lambda name=name: core.delete_namespaced_config_map(name, NAMESPACE))
