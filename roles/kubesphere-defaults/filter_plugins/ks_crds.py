"""Jinja filter: a CustomResourceDefinition from a compact description, for CRDs whose upstream schema is large.

The schema is structural and keeps unknown fields; names, group, scope, versions (served, storage, the status
subresource), short names and labels are upstream's.
"""

from __future__ import annotations

from typing import Any

PRESERVE = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


def ks_structural_crd(crd: dict[str, Any]) -> dict[str, Any]:
    """``{group, kind, plural, singular, scope, versions: [{name, storage, status}], short?, labels?}`` → CRD."""
    names = {"kind": crd["kind"], "listKind": f"{crd['kind']}List", "plural": crd["plural"],
             "singular": crd["singular"]}
    if crd.get("short"):
        names["shortNames"] = list(crd["short"])
    versions = [{"name": v["name"], "served": True, "storage": bool(v["storage"]), "schema": PRESERVE,
                 **({"subresources": {"status": {}}} if v.get("status") else {})} for v in crd["versions"]]
    metadata: dict[str, Any] = {"name": f"{crd['plural']}.{crd['group']}"}
    if crd.get("labels"):
        metadata["labels"] = dict(crd["labels"])
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": metadata,
            "spec": {"group": crd["group"], "scope": crd["scope"], "names": names, "versions": versions}}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_structural_crd": ks_structural_crd}
