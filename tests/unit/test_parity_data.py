"""The parity data (tests/parity): upstream facts in the chosen shape, and expectations that name them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

PARITY = Path(__file__).resolve().parents[2] / "tests" / "parity"
FILES = {p.stem: json.loads(p.read_text()) for p in sorted((PARITY / "upstream").glob("*.json"))}
EXPECTATIONS = yaml.safe_load((PARITY / "expectations.yaml").read_text())
HEADER = {"source", "upstream_tag", "upstream_commit", "module", "objects"}
VARIANT = {"variant_of", "variant_mode"}
OBJECT = {"apiVersion", "kind", "namespace", "name"}
OPTIONAL = {"helm_hook", "hook_delete_policy", "name_is_random"}
# (API group, kind) of the cluster-scoped kinds in the data: built-in ones, and custom ones whose CRD has
# scope Cluster in ks-installer v3.4.1.
CLUSTER_SCOPED = {
    ("", "Namespace"), ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"), ("policy", "PodSecurityPolicy"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("iam.kubesphere.io", "GlobalRole"), ("iam.kubesphere.io", "GlobalRoleBinding"),
    ("iam.kubesphere.io", "RoleBase"), ("iam.kubesphere.io", "User"), ("iam.kubesphere.io", "WorkspaceRole"),
    ("tenant.kubesphere.io", "Workspace"), ("tenant.kubesphere.io", "WorkspaceTemplate"),
    ("alerting.kubesphere.io", "GlobalRuleGroup"), ("monitoring.kubesphere.io", "ClusterDashboard"),
    ("notification.kubesphere.io", "NotificationManager"), ("application.kubesphere.io", "HelmRepo"),
    ("auditing.kubesphere.io", "Webhook"), ("devops.kubesphere.io", "ClusterStepTemplate"),
    ("devops.kubesphere.io", "ClusterTemplate"), ("devops.kubesphere.io", "S2iBuilderTemplate"),
}


def ref(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['namespace'] or ''}/{obj['name']}"


@pytest.mark.parametrize("stem", FILES)
def test_file_header(stem: str) -> None:
    data = FILES[stem]
    assert data["upstream_tag"] == "v3.4.1"
    assert re.fullmatch(r"[0-9a-f]{40}", data["upstream_commit"])
    assert data["source"] == "github.com/kubesphere/ks-installer"
    if "variant_of" in data:
        assert set(data) == HEADER | VARIANT
        assert data["variant_of"] == data["module"] and stem.startswith(data["module"] + "-")
        assert data["variant_mode"] in ("extend", "replace")
    else:
        assert set(data) == HEADER
        assert stem == data["module"]
    assert (PARITY.parents[1] / "playbooks" / f"{data['module']}.yaml").exists()


@pytest.mark.parametrize("stem", FILES)
def test_objects(stem: str) -> None:
    refs = [ref(o) for o in FILES[stem]["objects"]]
    assert len(refs) == len(set(refs)), "Kind/namespace/name must identify an object within a file"
    for obj in FILES[stem]["objects"]:
        assert OBJECT <= set(obj) <= OBJECT | OPTIONAL, obj
        assert all(isinstance(obj[k], str) and obj[k] for k in ("apiVersion", "kind", "name")), obj
        group = obj["apiVersion"].rpartition("/")[0]
        assert (obj["namespace"] is None) == ((group, obj["kind"]) in CLUSTER_SCOPED), obj
        assert obj["namespace"] is None or (isinstance(obj["namespace"], str) and obj["namespace"]), obj


def test_expectations_name_objects_of_the_data() -> None:
    gaps, extras = EXPECTATIONS["gaps"], EXPECTATIONS["extras"]
    assert set(gaps) <= set(FILES)
    assert set(extras) <= {data["module"] for data in FILES.values()}
    for stem, entries in gaps.items():
        assert set(entries) <= {ref(o) for o in FILES[stem]["objects"]}, stem
    for entries in [*gaps.values(), *extras.values()]:
        assert all(isinstance(reason, str) and reason.strip() for reason in entries.values())
