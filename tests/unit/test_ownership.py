"""Which of the objects carrying a module's label its prune and uninstall may delete (installer.objects.ownership)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from installer.modules import MODULES
from installer.objects.ownership import PROTECTED
from installer.objects.ownership import why_spared as spared

MODULE_NAMESPACES = {m.name: frozenset(m.namespaces) for m in MODULES}


def why_spared(module: str, ref: tuple[str, str, str, str]) -> str | None:
    """The deletion guard as a run of ``module`` has it (its namespaces from the registry)."""
    return spared(module, ref, MODULE_NAMESPACES[module])


UPSTREAM = Path(__file__).resolve().parents[1] / "parity" / "upstream"


def test_every_module_has_its_namespaces_and_upstreams_objects_lie_in_them() -> None:
    assert set(MODULE_NAMESPACES) == {m.name for m in MODULES}
    for path in sorted(UPSTREAM.glob("*.json")):
        data = json.loads(path.read_text())
        module = data["module"]
        outside = {o["namespace"] for o in data["objects"] if o["namespace"]} - MODULE_NAMESPACES[module]
        assert not outside, f"{path.name}: {module} renders into {sorted(outside)}"


def test_a_namespaced_object_outside_the_modules_namespaces_is_spared() -> None:
    assert why_spared("redis", ("v1", "ConfigMap", "default", "victim")) == (
        "namespace default is not one of module redis's")
    assert why_spared("redis", ("v1", "ConfigMap", "kubesphere-system", "a")) is None


@pytest.mark.parametrize("name", sorted(PROTECTED))
def test_protected_namespaces_are_never_deleted_even_by_the_module_that_labels_them(name: str) -> None:
    ref = ("v1", "Namespace", "", name)
    assert why_spared("preinstall", ref) is not None


def test_a_module_deletes_its_own_namespace_and_cluster_scoped_objects() -> None:
    ns, role = ("v1", "Namespace", "", "weave"), ("rbac.authorization.k8s.io/v1", "ClusterRole", "", "weave-scope")
    assert why_spared("network", ns) is None
    assert why_spared("network", role) is None
    assert why_spared("redis", ns) == "namespace weave is not one module redis may delete"
