"""Which writes to an installed object count as drift."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from installer.engine.drift import foreign_editor

APPLIED = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def _obj(*entries: dict) -> SimpleNamespace:
    return SimpleNamespace(metadata={"managedFields": list(entries)})


def _entry(manager: str, minute: int, subresource: str | None = None) -> dict:
    entry = {"manager": manager, "operation": "Update", "time": f"2026-01-01T12:{minute:02d}:00Z"}
    return {**entry, "subresource": subresource} if subresource else entry


def test_a_person_editing_after_the_run_is_drift() -> None:
    assert foreign_editor(_obj(_entry("ks-installer", 0), _entry("kubectl-edit", 5)), APPLIED) == "kubectl-edit"


def test_edits_before_the_run_are_not() -> None:
    assert foreign_editor(_obj(_entry("kubectl-edit", 0)), APPLIED) is None


def test_kubernetes_and_the_installer_are_not() -> None:
    obj = _obj(_entry("kube-controller-manager-v1.34.4", 5), _entry("ks-installer-rollout", 6),
               _entry("kubectl-edit", 7, subresource="status"), _entry("ks-installer", 8))
    assert foreign_editor(obj, APPLIED) is None
