"""The CRD filter's compact form of what `kubectl get` shows: printer columns and categories.

That every CRD the installer applies shows upstream's columns, short names and categories is checked on the
simulated cluster, after the all-modules reconcile (tests/integration/test_parity.py, with the facts of
tests/parity/crd_columns.json).
"""

from __future__ import annotations

from role_harness import filter_plugins


def test_compact_columns() -> None:
    crds = filter_plugins("kubesphere-defaults", "ks_crds")
    assert crds.ks_printer_columns([["Age", "date", ".metadata.creationTimestamp"],
                                    ["Revision", "string", ".status.sync.revision", 10],
                                    ["Host", "string", ".spec.host", 0, "The service"]]) == [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Revision", "type": "string", "jsonPath": ".status.sync.revision", "priority": 10},
        {"name": "Host", "type": "string", "jsonPath": ".spec.host", "description": "The service"}]
    crd = crds.ks_structural_crd({
        "group": "g.io", "kind": "K", "plural": "ks", "singular": "k", "scope": "Namespaced", "categories": ["all"],
        "columns": [["A", "string", ".a"]],
        "versions": [{"name": "v1", "storage": True}, {"name": "v2", "storage": False, "columns": []}]})
    assert crd["spec"]["names"]["categories"] == ["all"]
    assert [v.get("additionalPrinterColumns") for v in crd["spec"]["versions"]] == [
        [{"name": "A", "type": "string", "jsonPath": ".a"}], None]
