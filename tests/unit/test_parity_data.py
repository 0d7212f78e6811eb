"""The parity data (tests/parity): upstream facts in the chosen shape, and expectations that name them."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from installer_state import DEFAULT_CC
from parity_content import CREDENTIAL, GENERATED, differences, facts

from installer.config import apply_defaults
from installer.modules import MODULES

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
    assert data["module"] in {m.name for m in MODULES}


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


# Content facts per spec: directory (and expectations.yaml section) → the spec its header names → files by stem.
SPECS = {"content": "tests/integration/test_parity.py GROUPS['all']",
         "content-default": "installer/data/cluster-configuration.yaml (the default cc)"}
CONTENT = {section: {p.stem: json.loads(p.read_text()) for p in sorted((PARITY / section).glob("*.json"))}
           for section in SPECS}
CONTENT_FILES = [(section, stem) for section, files in CONTENT.items() for stem in files]
CONTENT_HEADER = {"source", "upstream_tag", "upstream_commit", "module", "spec", "objects"}
CONTENT_KINDS = {"ConfigMap", "Secret", "ClusterRole", "Role", "PrometheusRule", "MutatingWebhookConfiguration",
                 "ValidatingWebhookConfiguration"}
# A fact's path: its first step per kind (tests/parity_content.py).
RBAC = {"rules", "nonResourceURLs", "aggregation", "annotations"}
FIRST_STEP = {"ConfigMap": {"data"}, "Secret": {"keys"}, "ClusterRole": RBAC, "Role": RBAC,
              "PrometheusRule": {"groups"}, "MutatingWebhookConfiguration": {"webhooks"},
              "ValidatingWebhookConfiguration": {"webhooks"}}


def upstream_refs(module: str, variants: bool = True) -> set[str]:
    """The objects of ``module``'s inventory files (without ``variants``, its main file's only)."""
    return {ref(o) for data in FILES.values() if data["module"] == module and (variants or "variant_of" not in data)
            for o in data["objects"]}


def test_default_content_covers_the_default_platform() -> None:
    """tests/parity/content-default has a file for each module the default cc installs, and only those."""
    spec = apply_defaults(copy.deepcopy(DEFAULT_CC["spec"]))
    assert set(CONTENT["content-default"]) == {m.name for m in MODULES if m.enabled(spec)}


@pytest.mark.parametrize(("section", "stem"), CONTENT_FILES)
def test_content_file(section: str, stem: str) -> None:
    """Content facts: the header of the tag and spec, objects of the module's inventory (for the default cc, of its
    main file: no variant is on), paths of their kind, no credential."""
    data = CONTENT[section][stem]
    assert set(data) == CONTENT_HEADER
    assert data["upstream_tag"] == "v3.4.1" and data["module"] == stem and data["spec"] == SPECS[section]
    assert data["upstream_commit"] == FILES[stem]["upstream_commit"]
    assert data["source"] == "github.com/kubesphere/ks-installer"
    assert set(data["objects"]) <= upstream_refs(stem, variants=section == "content")
    for r, paths in data["objects"].items():
        kind = r.split("/")[0]
        assert kind in CONTENT_KINDS, r
        for path, value in paths.items():
            assert path.split("/")[0] in FIRST_STEP[kind], (r, path)
            if kind == "ConfigMap" and CREDENTIAL.search(path.rsplit("/", 1)[-1]):
                assert value == GENERATED, (r, path)


@pytest.mark.parametrize("section", SPECS)
def test_content_expectations_name_facts(section: str) -> None:
    """Each documented content difference (per section: its spec's facts) names an object of the content facts,
    paths of its kind, a reason."""
    facts_of = {r for data in CONTENT[section].values() for r in data["objects"]}
    for r, paths in EXPECTATIONS[section].items():
        assert r in facts_of, r
        kind = r.split("/")[0]
        for path, reason in paths.items():
            assert path.split("/")[0] in FIRST_STEP[kind], (r, path)
            assert isinstance(reason, str) and reason.strip(), (r, path)


def test_content_facts_compare_meaning_not_layout() -> None:
    """Credentials become placeholders compared as present; JSON and text compare by content, not by layout."""
    def cm(data: dict[str, str]) -> dict[str, Any]:
        return {"kind": "ConfigMap", "data": data}

    upstream = facts(cm({"a.yaml": "s3:\n  secretAccessKey: k\n  bucket: b\n", "d.json": '{"x": [1, 2]}',
                         "run.sh": "echo hi   \n\n" * 30}))
    assert upstream["data/a.yaml/s3/secretAccessKey"] == GENERATED
    live = facts(cm({"a.yaml": "s3: {bucket: b, secretAccessKey: KUBESPHERE_S3}", "d.json": '{\n "x": [1,2]}',
                     "run.sh": "echo hi\n\n" * 30}))
    assert differences(upstream, live) == {}
    assert set(differences(upstream, facts(cm({"a.yaml": "s3: {bucket: c}"})))) == {
        "data/a.yaml/s3/bucket", "data/a.yaml/s3/secretAccessKey", "data/d.json", "data/run.sh"}


def test_rbac_facts_are_grants() -> None:
    """Rules compare as the (group, resource, verb[, name]) grants they make, however they are grouped."""
    rule = {"apiGroups": ["", "apps"], "resources": ["pods"], "verbs": ["get", "list"]}
    one = {"kind": "ClusterRole", "rules": [rule]}
    two = {"kind": "ClusterRole", "rules": [{"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["list", "get"]},
                                            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}
    assert facts(one) == facts(two) and "rules/core/pods/get" in facts(one)
