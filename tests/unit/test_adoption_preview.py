"""What the takeover's apply removes from an object the original installer made (plan --objects shows it)."""

from __future__ import annotations

from installer.objects.field_takeover import LAST_APPLIED, dropped_by_takeover


def entry(manager: str, operation: str, labels: tuple[str, ...] = (), annotations: tuple[str, ...] = ()) -> dict:
    meta = {}
    if labels:
        meta["f:labels"] = {f"f:{k}": {} for k in labels}
    if annotations:
        meta["f:annotations"] = {f"f:{k}": {} for k in annotations}
    return {"manager": manager, "operation": operation, "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": meta}}


def test_what_only_the_original_set_and_the_installer_does_not_is_dropped() -> None:
    live = {"metadata": {
        "labels": {"app": "redis", "app.kubernetes.io/managed-by": "Helm", "team": "a"},
        "annotations": {LAST_APPLIED: "{}", "meta.helm.sh/release-name": "ks-redis", "note": "by hand"},
        "managedFields": [
            entry("kubectl-client-side-apply", "Update", labels=("app",), annotations=(LAST_APPLIED,)),
            entry("helm", "Update", labels=("app.kubernetes.io/managed-by", "team"),
                  annotations=("meta.helm.sh/release-name",)),
            entry("kubectl-edit", "Update", labels=("team",), annotations=("note",)),  # a person's: stays
        ]}}
    body = {"metadata": {"labels": {"app": "redis", "app.kubernetes.io/managed-by": "ks-installer"}}}
    assert dropped_by_takeover(live, body) == [
        f"metadata.annotations.{LAST_APPLIED}", "metadata.annotations.meta.helm.sh/release-name"]


def test_nothing_is_dropped_from_an_object_without_the_originals_managers() -> None:
    live = {"metadata": {"annotations": {"note": "x"},
                         "managedFields": [entry("ks-installer", "Apply", annotations=("note",))]}}
    assert dropped_by_takeover(live, {"metadata": {}}) == []


def test_a_label_the_api_server_sets_is_not_dropped() -> None:
    live = {"metadata": {"labels": {"kubernetes.io/metadata.name": "kubesphere-system"},
                         "managedFields": [entry("kubectl-client-side-apply", "Update",
                                                 labels=("kubernetes.io/metadata.name",))]}}
    assert dropped_by_takeover(live, {"metadata": {}}) == []
