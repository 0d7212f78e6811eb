"""Values that mean "unset" (``null``, ``""``, absent) compare equal in change detection where the roles read them
the same: a KubeKey cc re-applied with nothing changed plans no module; a real change still plans one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from installer.config import prepare
from installer.engine.fingerprint import inputs_of, module_hash
from installer.engine.plan import Action, Plan, build_plan, records_for
from installer.engine.records import Record
from installer.engine.unset import without_unset
from installer.modules import MODULES
from installer.spec import get

REPO = Path(__file__).resolve().parents[2]
KUBEKEY = sorted((REPO / "tests" / "clients" / "kubekey").glob("cc_v3.[0-3].*.yaml"))
DEFAULT_MODULES = ["ks-config", "ks-core", "monitoring", "preinstall"]

#: The ways a cc spells "unset" at the keys upstream's default cc leaves out.
UNSET = [None, ""]


def files(_: object) -> str:
    return "code"


def _cc(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())["spec"]


def _plan(raw: dict[str, Any], installed: dict[str, Any], records: dict[str, Record]) -> Plan:
    prepared = prepare(copy.deepcopy(raw), installed)
    assert prepared.errors == []
    return build_plan(prepared.spec, records, files)


def _installed(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Record]]:
    spec = prepare(copy.deepcopy(raw)).spec
    return spec, records_for(spec, files)


def _ran(plan: Plan) -> list[str]:
    return sorted(s.module for s in plan.runnable)


@pytest.mark.parametrize("path", KUBEKEY, ids=[p.stem for p in KUBEKEY])
@pytest.mark.parametrize("before", ["absent", *UNSET])
@pytest.mark.parametrize("after", ["absent", *UNSET])
def test_a_kubekey_cc_that_only_spells_unset_differently_plans_nothing(path: Path, before: Any, after: Any) -> None:
    """Installed from KubeKey's cc (v3.0.0 to v3.3.x shapes) with namespace_override, zone and multicluster's
    optional strings absent, null or ``""``; the same cc applied again with any other of those spellings."""
    def spelled(value: Any) -> dict[str, Any]:
        raw = copy.deepcopy(_cc(path))
        for key in ("namespace_override", "zone"):
            raw.pop(key, None)
        raw.setdefault("multicluster", {})
        if value != "absent":
            raw |= {"namespace_override": value, "zone": value}
            raw["multicluster"] |= {"proxyPublishAddress": value, "hostClusterName": value}
        return raw

    installed, records = _installed(spelled(before))
    plan = _plan(spelled(after), installed, records)
    assert _ran(plan) == [], {s.module: s.changes for s in plan.runnable}


@pytest.mark.parametrize("old, new, modules, change", [
    ("", "kubesphere", DEFAULT_MODULES, 'namespace_override: null -> "kubesphere"'),
    (None, "kubesphere", DEFAULT_MODULES, 'namespace_override: null -> "kubesphere"'),
    ("kubesphereio", "", DEFAULT_MODULES, 'namespace_override: "kubesphereio" -> null'),
    ("kubesphereio", None, DEFAULT_MODULES, 'namespace_override: "kubesphereio" -> null'),
])
def test_a_real_change_of_an_optional_key_still_plans_its_readers(old: Any, new: Any, modules: list[str],
                                                                  change: str) -> None:
    raw = _cc(KUBEKEY[-1])
    installed, records = _installed({**raw, "namespace_override": old})
    plan = _plan({**raw, "namespace_override": new}, installed, records)
    assert _ran(plan) == modules
    assert all(change in plan.step(m).changes for m in modules)


def test_null_where_the_default_is_not_empty_is_a_change_to_the_default() -> None:
    raw = _cc(KUBEKEY[-1])
    assert get(raw, "etcd.endpointIps") == "192.168.0.2"
    installed, records = _installed(raw)
    plan = _plan({**raw, "etcd": {**raw["etcd"], "endpointIps": None}}, installed, records)
    assert _ran(plan) == ["monitoring"]
    assert plan.step("monitoring").changes == ('etcd.endpointIps: "192.168.0.2" -> "localhost"',)


def test_a_module_recorded_with_an_empty_string_is_unchanged_at_its_recorded_hash() -> None:
    """A record written before empty values meant unset holds ``namespace_override: ""`` (and its hash): the same
    cc, or one without the key, runs nothing, and the step keeps the record's hash (the module counts as current)."""
    raw = {**_cc(KUBEKEY[-1]), "namespace_override": "", "zone": ""}
    installed = prepare(copy.deepcopy(raw)).spec
    records = {}
    for module in (m for m in MODULES if m.enabled(installed)):
        inputs = {path: get(installed, path) for path in module.all_inputs}  # as recorded then
        records[module.name] = Record(module.name, module_hash(module, inputs, files(module)), inputs)
    assert records["ks-core"].inputs["namespace_override"] == ""
    for spec in (raw, {k: v for k, v in raw.items() if k not in ("namespace_override", "zone")}):
        plan = _plan(spec, installed, records)
        assert _ran(plan) == []
        assert all(records[m].current_at(plan.step(m).hash) for m in records)
    plan = _plan({**raw, "zone": "cn"}, installed, records)
    assert _ran(plan) == DEFAULT_MODULES
    assert plan.step("ks-core").changes == ('zone: null -> "cn"',)


def test_a_default_install_keeps_its_inputs_and_hashes() -> None:
    """Nothing to remove from the default spec: modules installed before keep their hash."""
    spec = prepare({}).spec
    for module in MODULES:
        assert inputs_of(module, spec) == {path: get(spec, path) for path in module.all_inputs}


@pytest.mark.parametrize("path, value, expected", [
    ("namespace_override", "", None),
    ("namespace_override", None, None),
    ("namespace_override", "kubesphereio", "kubesphereio"),
    ("multicluster", {"clusterRole": "none", "hostClusterName": "", "proxyPublishAddress": None},
     {"clusterRole": "none"}),
    ("multicluster", {"clusterRole": "none", "hostClusterName": "host"}, {"clusterRole": "none",
                                                                          "hostClusterName": "host"}),
    ("devops", {"sonarqube": {"externalSonarUrl": ""}}, {"sonarqube": {}}),
    ("local_registry", "", ""),  # its default is "": already the same as absent
    ("etcd", {"endpointIps": ""}, {"endpointIps": ""}),  # "" is a value there, not the default "localhost"
])
def test_without_unset(path: str, value: Any, expected: Any) -> None:
    assert without_unset(path, value) == expected


def test_unchanged_steps_report_no_action() -> None:
    raw = _cc(KUBEKEY[-1])
    installed, records = _installed(raw)
    plan = _plan({**raw, "zone": ""}, installed, records)
    assert {s.action for s in plan.steps if s.module in records} == {Action.UNCHANGED}
