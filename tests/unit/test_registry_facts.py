"""A module's facts live in the registry once: the namespaces its role names and its serving certificates reach its
runs as data (``Module.run_facts``), which its role reads and no role default restates; the module's hash covers its
own facts, not the registry's file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from installer.engine.fingerprint import ENGINE_DIR, code_files, files_digest
from installer.engine.plays import play_variables
from installer.modules import MODULES, Namespaces, get_module

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"


def _role_text(role: str) -> str:
    return "\n".join(p.read_text() for p in sorted((ROLES / role).rglob("*")) if p.is_file() and p.suffix != ".pyc")


def _tasks(role: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((ROLES / role / "tasks").glob("*.yaml")):
        todo = list(yaml.safe_load(path.read_text()) or [])
        while todo:
            task = todo.pop(0)
            todo[:0] = task.get("block", []) + task.get("rescue", []) + task.get("always", [])
            out.append(task)
    return out


def test_each_fact_is_declared_in_the_registry_alone_and_read_by_its_role() -> None:
    for module in MODULES:
        facts = module.run_facts()
        path = ROLES / module.role / "defaults" / "main.yaml"
        defaults = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
        shared = yaml.safe_load((ROLES / "kubesphere-defaults" / "defaults" / "main.yaml").read_text())
        assert not set(facts) & (set(defaults) | set(shared)), module.name
        text = _role_text(module.role)
        assert [v for v in facts if v not in text] == [], module.name


def test_every_certificate_is_its_roles_ks_webhook_cert_call() -> None:
    """Each of a module's certificates is one ``ks_webhook_cert`` call of its role, every argument from the fact."""
    for module in MODULES:
        calls = [t["ks_webhook_cert"] for t in _tasks(module.role) if "ks_webhook_cert" in t]
        assert len(calls) == len(module.certificates), module.name
        for cert, call in zip(module.certificates, calls, strict=True):
            var = f"ks_{cert.key}_cert"
            fields = [f for f in ("namespace", "service", "secret", "ca_name", "cert_name", "type",
                                  "max_validity_days") if f in module.run_facts()[var]]
            assert {f: call.get(f) for f in fields} == {f: f"{{{{ {var}.{f} }}}}" for f in fields}, module.name
            assert call["keys"] == f"{{{{ {var}['keys'] }}}}"


def test_the_engine_hands_the_facts_to_runs_and_renders() -> None:
    devops = get_module("devops")
    variables = play_variables(devops)
    assert variables["ks_devops_namespace"] == "kubesphere-devops-system"
    assert variables["ks_devops_s2i_cert"]["secret"] == "s2i-webhook-server-cert"
    assert play_variables(get_module("preinstall"))["ks_preinstall_namespaces"] == [
        "kubesphere-controls-system", "kubesphere-monitoring-system", "kubesphere-monitoring-federated"]


def test_a_modules_facts_are_in_its_hash_and_the_registry_file_in_none() -> None:
    """A change to a module's facts re-runs that module (its hash covers them); the registry's file is code of no
    module's run but telemetry's (whose task reads the cc as the engine does), so an edit of another module's entry
    re-runs nothing else."""
    devops = get_module("devops")
    cert = dataclasses.replace(devops.certificates[0], secret="renamed")
    renamed = dataclasses.replace(devops, certificates=(cert,))
    assert files_digest(renamed, ROLES) != files_digest(devops, ROLES)
    moved = dataclasses.replace(devops, namespaces=Namespaces(
        devops="kubesphere-devops-system", devops_worker="elsewhere", devops_argocd="argocd",
        devops_monitoring="kubesphere-monitoring-system"))
    assert files_digest(moved, ROLES) != files_digest(devops, ROLES)
    renamed_variable = dataclasses.replace(devops, namespaces=Namespaces(
        devops="kubesphere-devops-system", devops_workers="kubesphere-devops-worker", devops_argocd="argocd",
        devops_monitoring="kubesphere-monitoring-system"))
    assert files_digest(renamed_variable, ROLES) != files_digest(devops, ROLES)
    for module in MODULES:
        if module.name != "telemetry":
            assert ENGINE_DIR / "modules.py" not in code_files(module, ROLES), module.name
