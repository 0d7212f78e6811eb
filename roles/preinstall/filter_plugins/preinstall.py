"""Jinja filters for the preinstall checks and lookups."""

from __future__ import annotations

from typing import Any

from installer.objects.credentials import password_missing
from installer.settings import MODULE_LABEL

DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")


def ks_password_missing(password: str) -> list[str]:
    """What ``password`` lacks (empty when it is complex enough). Never includes the password itself."""
    return password_missing(password)


def ks_default_storage_classes(classes: list[dict[str, Any]]) -> list[str]:
    """Names of the StorageClasses marked as the default (GA or beta annotation)."""
    return [c["metadata"]["name"] for c in classes
            if any((c["metadata"].get("annotations") or {}).get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS)]


def ks_not_owned_by(objects: list[dict[str, Any]], module: str) -> list[str]:
    """Names of the ``objects`` that do not carry ``module``'s label (someone else created them)."""
    return [o["metadata"]["name"] for o in objects
            if (o["metadata"].get("labels") or {}).get(MODULE_LABEL) != module]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_password_missing": ks_password_missing, "ks_default_storage_classes": ks_default_storage_classes,
                "ks_not_owned_by": ks_not_owned_by}
