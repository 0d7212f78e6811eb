"""The installer manifest's RBAC: cluster-wide only what the modules need, the lock in its own namespace."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = [d for d in yaml.safe_load_all((REPO / "deploy" / "kubesphere-installer.yaml").read_text()) if d]


def _rules(kind: str) -> list[dict]:
    return next(d for d in DOCS if d["kind"] == kind and d["metadata"]["name"] == "ks-installer")["rules"]


def test_leases_and_events_only_in_kubesphere_system() -> None:
    assert not any("coordination.k8s.io" in r["apiGroups"] for r in _rules("ClusterRole"))
    role = next(d for d in DOCS if d["kind"] == "Role")
    assert role["metadata"]["namespace"] == "kubesphere-system"
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update", "patch"]},
                             {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    assert not any("events" in r["resources"] for r in _rules("ClusterRole"))
    binding = next(d for d in DOCS if d["kind"] == "RoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ks-installer"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ks-installer", "namespace": "kubesphere-system"}]


def test_no_wildcard_verbs_and_no_pod_writes() -> None:
    for rule in _rules("ClusterRole"):
        assert "*" not in rule["verbs"]
        if "pods" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}
