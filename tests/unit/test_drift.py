"""Which writes to an installed object count as drift: what the API server wrote (UIDs, field sets, the values under
the installer's fields), never a manager's name or an entry's time."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from installer.engine import drift
from installer.engine.records import Record, object_key
from installer.objects.foreign import tree
from installer.objects.inventory import facts_of

REF = ("v1", "ConfigMap", "kubesphere-system", "kubesphere-config")
OURS = {"manager": "ks-installer", "operation": "Apply", "time": "2026-01-01T00:00:00Z",
        "fieldsV1": tree([("f:data", "f:kubesphere.yaml"),
                          ("f:metadata", "f:labels", "f:installer.kubesphere.io/module")])}


def _live(uid: str = "u1", data: str = "a: 1\n", *others: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": REF[3], "namespace": REF[2], "uid": uid,
                         "labels": {"installer.kubesphere.io/module": "ks-config"},
                         "managedFields": [OURS, *others]},
            "data": {"kubesphere.yaml": data}}


def _found(live: dict[str, Any], recorded: dict[str, Any], monkeypatch: Any) -> list[str]:
    # The list as the API server sends it (its raw JSON body).
    resource = SimpleNamespace(get=lambda **_: SimpleNamespace(data=json.dumps({"items": [live]})))
    monkeypatch.setattr(drift, "DynamicClient", lambda api: SimpleNamespace(
        resources=SimpleNamespace(get=lambda **_: resource)))
    record = Record("ks-config", "h", {}, "2026-01-01T00:00:00Z", "v", (REF,), objects={object_key(REF): tuple(
        facts_of(recorded))})
    return drift.find_drift(None, {"ks-config": record}).get("ks-config", [])  # type: ignore[arg-type]


def _entry(manager: str, *paths: tuple[str, ...]) -> dict[str, Any]:
    return {"manager": manager, "operation": "Update", "time": "2026-01-01T00:00:00Z", "fieldsV1": tree(list(paths))}


def test_an_object_as_the_installer_left_it_is_no_drift(monkeypatch: Any) -> None:
    assert _found(_live(), _live(), monkeypatch) == []


def test_another_writers_label_or_key_is_no_drift(monkeypatch: Any) -> None:
    neighbour = _entry("kubectl-label", ("f:metadata", "f:labels", "f:team"), ("f:data", "f:extra"))
    assert _found(_live("u1", "a: 1\n", neighbour), _live(), monkeypatch) == []


def test_a_taken_field_is_drift_named_by_its_writer(monkeypatch: Any) -> None:
    taken = _live("u1", "edited: true\n", _entry("kubectl-edit", ("f:data", "f:kubesphere.yaml")))
    taken["metadata"]["managedFields"][0] = {**OURS, "fieldsV1": tree([
        ("f:metadata", "f:labels", "f:installer.kubesphere.io/module")])}
    assert _found(taken, _live(), monkeypatch) == [
        "ConfigMap/kubesphere-system/kubesphere-config changed by kubectl-edit: data.kubesphere.yaml"]


def test_a_value_written_under_the_installers_name_and_a_forged_date_is_drift(monkeypatch: Any) -> None:
    forged = _live("u1", "evil: true\n")
    forged["metadata"]["managedFields"] = [{**OURS, "time": "2099-01-01T00:00:00Z"}]
    assert _found(forged, _live(), monkeypatch) == [
        "ConfigMap/kubesphere-system/kubesphere-config changed by the installer's own field manager"]


def test_an_object_made_again_by_someone_else_is_drift(monkeypatch: Any) -> None:
    assert _found(_live("u2"), _live(), monkeypatch) == [
        "ConfigMap/kubesphere-system/kubesphere-config replaced by an object the installer did not make"]
