"""Which of the objects carrying a module's label its prune and uninstall may delete (installer.ownership)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from installer.modules import MODULES
from installer.ownership import MODULE_NAMESPACES, PROTECTED, RECORDED_ENV, key, recorded, why_spared

UPSTREAM = Path(__file__).resolve().parents[1] / "parity" / "upstream"


def test_every_module_has_its_namespaces_and_upstreams_objects_lie_in_them() -> None:
    assert set(MODULE_NAMESPACES) == {m.name for m in MODULES}
    for path in sorted(UPSTREAM.glob("*.json")):
        data = json.loads(path.read_text())
        module = data["module"]
        outside = {o["namespace"] for o in data["objects"] if o["namespace"]} - MODULE_NAMESPACES[module]
        assert not outside, f"{path.name}: {module} renders into {sorted(outside)}"


def test_a_namespaced_object_outside_the_modules_namespaces_is_spared() -> None:
    inventory = {key(("v1", "ConfigMap", "default", "victim")), key(("v1", "ConfigMap", "kubesphere-system", "a"))}
    assert why_spared("redis", ("v1", "ConfigMap", "default", "victim"), inventory) == (
        "namespace default is not one of module redis's")
    assert why_spared("redis", ("v1", "ConfigMap", "kubesphere-system", "a"), inventory) is None
    # The recorded inventory does not bound a prune (records of older runs may lack what they applied).
    assert why_spared("redis", ("v1", "ConfigMap", "kubesphere-system", "b"), inventory) is None
    assert why_spared("redis", ("v1", "ConfigMap", "kubesphere-system", "b"), None) is None  # no engine run


@pytest.mark.parametrize("name", sorted(PROTECTED))
def test_protected_namespaces_are_never_deleted_even_by_the_module_that_labels_them(name: str) -> None:
    ref = ("v1", "Namespace", "", name)
    assert why_spared("preinstall", ref, {key(ref)}) is not None


def test_a_module_deletes_its_own_namespace_and_cluster_scoped_objects_it_recorded() -> None:
    ns, role = ("v1", "Namespace", "", "weave"), ("rbac.authorization.k8s.io/v1", "ClusterRole", "", "weave-scope")
    assert why_spared("network", ns, {key(ns), key(role)}) is None
    assert why_spared("network", role, {key(ns), key(role)}) is None
    assert why_spared("redis", ns, {key(ns)}) == "namespace weave is not one module redis may delete"


def test_the_recorded_inventory_matches_any_version_of_a_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps([["policy/v1beta1", "PodDisruptionBudget", "kube-system", "x"]]))
    monkeypatch.setenv(RECORDED_ENV, str(path))
    assert why_spared("metrics_server", ("policy/v1", "PodDisruptionBudget", "kube-system", "x"), recorded()) is None
