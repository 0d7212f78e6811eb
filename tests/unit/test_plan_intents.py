"""Planning over unfinished runs: a module whose last run did not finish is never taken as installed."""

from __future__ import annotations

from installer_state import DEFAULT_CC

from installer.config import apply_defaults
from installer.engine.fingerprint import inputs_of, module_hash
from installer.engine.plan import Action, build_plan
from installer.engine.records import Intent, Record
from installer.modules import get_module


def files(_: object) -> str:
    return "code"


def _spec(**top: object) -> dict:
    return apply_defaults({**DEFAULT_CC["spec"], **top})


def _installed(name: str, spec: dict, intent: Intent | None = None) -> Record:
    module = get_module(name)
    inputs = inputs_of(module, spec)
    return Record(name, module_hash(module, inputs, files(module)), inputs, intent=intent)


def test_failed_upgrade_reverted_runs_again() -> None:
    spec = _spec()
    record = _installed("monitoring", spec, Intent("upgrade", "other", "t", "failed"))
    step = build_plan(spec, {"monitoring": record}, files).step("monitoring")
    assert step.action == Action.UPGRADE
    assert step.changes == ("its last upgrade did not finish (failed)",)


def test_interrupted_first_install_of_a_now_disabled_module_is_uninstalled() -> None:
    spec = _spec(network={"topology": {"type": "none"}})
    record = Record("network", None, {}, intent=Intent("install", "h", "t", "running"))
    step = build_plan(spec, {"network": record}, files).step("network")
    assert step.action == Action.UNINSTALL and "did not finish" in step.reason


def test_interrupted_first_install_still_wanted_is_installed() -> None:
    spec = _spec(gatekeeper={"enabled": True})
    record = Record("gatekeeper", None, {}, intent=Intent("install", "h", "t", "interrupted"))
    step = build_plan(spec, {"gatekeeper": record}, files).step("gatekeeper")
    assert step.action == Action.INSTALL and step.changes == ("its last install did not finish (interrupted)",)


def test_drift_repairs_an_unchanged_module() -> None:
    spec = _spec()
    plan = build_plan(spec, {"monitoring": _installed("monitoring", spec)}, files,
                      drift={"monitoring": ["Service/x/y missing"]})
    assert plan.step("monitoring").action == Action.UPGRADE
    assert plan.step("monitoring").changes == ("drift: Service/x/y missing",)


def test_completed_record_with_matching_hash_is_unchanged() -> None:
    spec = _spec()
    assert build_plan(spec, {"monitoring": _installed("monitoring", spec)}, files).step("monitoring").action \
        == Action.UNCHANGED


def test_remove_all_uninstalls_every_recorded_module_and_purges_only_when_asked() -> None:
    spec = _spec()
    records = {n: _installed(n, spec) for n in ("preinstall", "ks-core", "monitoring")}
    plan = build_plan(spec, records, files, remove_all=True, purge={"monitoring"})
    assert sorted(plan.names(Action.UNINSTALL)) == ["ks-core", "monitoring", "preinstall"]
    assert plan.step("ks-core").changes == ("removal of every module (uninstall --all)",)
    assert [s.module for s in plan.steps if s.purge] == ["monitoring"]
    assert plan.to_json()["purge"] == ["monitoring"]
    assert plan.step("redis").action == Action.UNCHANGED  # never installed: nothing to remove


def test_purge_applies_to_uninstalls_only() -> None:
    spec = _spec()
    plan = build_plan(spec, {"monitoring": _installed("monitoring", spec)}, files, purge={"monitoring", "redis"})
    assert not any(s.purge for s in plan.steps)  # monitoring stays installed, redis was never installed


def test_a_later_admin_password_change_runs_nothing_and_says_why() -> None:
    first = _spec(authentication={"jwtSecret": "", "adminPassword": "First-Passw0rd"})
    records = {n: _installed(n, first) for n in ("preinstall", "ks-core", "ks-config")}
    later = _spec(authentication={"jwtSecret": "", "adminPassword": "Other-Passw0rd"})
    plan = build_plan(later, records, files)
    for name in ("preinstall", "ks-core", "ks-config"):
        step = plan.step(name)
        assert step.action == Action.UNCHANGED, name
        assert step.note.startswith("spec.authentication.adminPassword acts only at the first install"), name
    # another change to the same section still runs, and keeps the password the module was installed with
    changed = _spec(authentication={"jwtSecret": "", "adminPassword": "Other-Passw0rd", "maximumClockSkew": "20s"})
    step = build_plan(changed, records, files).step("ks-config")
    assert step.action == Action.UPGRADE and step.inputs["authentication"]["adminPassword"] == "First-Passw0rd"
    assert "adminPassword" not in " ".join(step.changes) and "maximumClockSkew" in " ".join(step.changes)
    # a first install uses it
    assert build_plan(later, {}, files).step("ks-core").action == Action.INSTALL


def test_cluster_role_transitions_are_checked_against_what_was_applied() -> None:
    from installer.config import prepare
    from installer.engine.plan import applied_spec

    auth = {**DEFAULT_CC["spec"]["authentication"], "jwtSecret": "shared-with-the-host"}
    member = _spec(multicluster={"clusterRole": "member"}, authentication=auth)
    host = {**DEFAULT_CC["spec"], "authentication": auth, "multicluster": {"clusterRole": "host"}}
    # member was accepted but ks-config never got installed with it (a failed run): promoting is allowed
    records = {"ks-config": _installed("ks-config", _spec())}
    assert not prepare(host, member, applied=applied_spec(records, member)).errors
    # once ks-config is installed as a member, promotion is refused and the message says how to start over
    records["ks-config"] = _installed("ks-config", member)
    errors = prepare(host, member, applied=applied_spec(records, member)).errors
    assert [e.path for e in errors] == ["multicluster.clusterRole"]
    assert "python -m installer uninstall --all" in errors[0].message


def test_a_derived_module_goes_with_its_last_consumer_only() -> None:
    """openldap runs for devops or for common.openldap.enabled: devops off uninstalls it only when nothing else
    still wants it."""
    on = _spec(devops={"enabled": True})
    records = {name: _installed(name, on) for name in ("preinstall", "ks-core", "ks-config", "openldap", "devops")}
    off = _spec(devops={"enabled": False})
    plan = build_plan(off, records, files)
    assert plan.step("devops").action == Action.UNINSTALL and plan.step("openldap").action == Action.UNINSTALL
    wanted = _spec(devops={"enabled": False}, common={**off["common"], "openldap": {"enabled": True}})
    plan = build_plan(wanted, records, files)
    assert plan.step("devops").action == Action.UNINSTALL
    assert plan.step("openldap").action not in (Action.UNINSTALL, Action.INSTALL)


def test_devops_without_an_external_s3_installs_openldap_and_minio_first() -> None:
    from installer.engine.plan import run_order

    records = {name: _installed(name, _spec()) for name in ("preinstall", "ks-core", "ks-config", "monitoring")}
    plan = build_plan(_spec(devops={"enabled": True}), records, files)
    assert {s.module: s.action for s in plan.runnable} == {
        "openldap": Action.INSTALL, "minio": Action.INSTALL, "devops": Action.INSTALL, "ks-config": Action.UPGRADE}
    assert run_order(plan)["devops"] == {"openldap": True, "minio": True}
