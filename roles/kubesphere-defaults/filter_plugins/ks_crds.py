"""Jinja filter: a CustomResourceDefinition from a compact description, for CRDs whose upstream schema is large.

The schema is structural and keeps unknown fields; names, group, scope, versions (served, storage, the status
subresource, deprecation), printer columns, short names, categories, labels and annotations are upstream's.
"""

from __future__ import annotations

from typing import Any

PRESERVE = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


def ks_printer_columns(columns: list[list[Any]]) -> list[dict[str, Any]]:
    """``[[name, type, jsonPath, priority?, description?], ...]`` → ``additionalPrinterColumns`` (a priority of 0
    and an empty description are left out, as the API server stores them)."""
    out = []
    for column in columns:
        name, type_, path, *rest = column
        entry: dict[str, Any] = {"name": name, "type": type_, "jsonPath": path}
        if rest and rest[0]:
            entry["priority"] = int(rest[0])
        if len(rest) > 1 and rest[1]:
            entry["description"] = rest[1]
        out.append(entry)
    return out


def ks_structural_crd(crd: dict[str, Any]) -> dict[str, Any]:
    """``{group, kind, plural, singular, scope, versions: [{name, storage, status, columns?, deprecated?,
    deprecationWarning?, subresources?}], columns?, short?, categories?, labels?, annotations?}`` → CRD.
    ``columns`` (see ``ks_printer_columns``) on the CRD apply to every version that has none of its own. A
    version's ``subresources``, when given, are written as they are (``status`` then plays no part)."""
    names = {"kind": crd["kind"], "listKind": f"{crd['kind']}List", "plural": crd["plural"],
             "singular": crd["singular"]}
    if crd.get("short"):
        names["shortNames"] = list(crd["short"])
    if crd.get("categories"):
        names["categories"] = list(crd["categories"])
    versions = []
    for v in crd["versions"]:
        version: dict[str, Any] = {"name": v["name"], "served": True, "storage": bool(v["storage"]),
                                   "schema": PRESERVE}
        if "subresources" in v:
            version["subresources"] = dict(v["subresources"])
        elif v.get("status"):
            version["subresources"] = {"status": {}}
        for key in ("deprecated", "deprecationWarning"):
            if key in v:
                version[key] = v[key]
        columns = v.get("columns", crd.get("columns"))
        if columns:
            version["additionalPrinterColumns"] = ks_printer_columns(columns)
        versions.append(version)
    metadata: dict[str, Any] = {"name": f"{crd['plural']}.{crd['group']}"}
    if crd.get("labels"):
        metadata["labels"] = dict(crd["labels"])
    if crd.get("annotations"):
        metadata["annotations"] = dict(crd["annotations"])
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": metadata,
            "spec": {"group": crd["group"], "scope": crd["scope"], "names": names, "versions": versions}}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_structural_crd": ks_structural_crd, "ks_printer_columns": ks_printer_columns}
