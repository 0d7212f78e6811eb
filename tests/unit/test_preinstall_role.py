"""The preinstall role's objects (system namespaces, snapshot controller), rendered by Ansible (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from role_harness import engine_vars, filter_plugins, run_play

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = json.loads((REPO / "tests" / "parity" / "upstream" / "preinstall.json").read_text())
SNAPSHOT_CRDS = {f"{p}.snapshot.storage.k8s.io" for p in ("volumesnapshotclasses", "volumesnapshotcontents",
                                                          "volumesnapshots")}
CREATED = ["kubesphere-controls-system", "kubesphere-monitoring-system", "kubesphere-monitoring-federated"]
PRESENT = ["kubesphere-system", "default", "kube-system", "kube-public", "some-app"]
# name → (spec changes, extra variables)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {"ks_preinstall_present_namespaces": PRESENT}),
    "fresh": ({}, {}),
    "registry": ({"local_registry": "reg.local:5000", "namespace_override": "mirror",
                  "nodeSelector": {"role": "infra"}, "tolerations": [{"operator": "Exists"}],
                  "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                      "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}}}, {}),
    "zone_cn": ({"zone": "cn"}, {}),
    "csi_crds": ({}, {"ks_preinstall_foreign_crds": ["volumesnapshots.snapshot.storage.k8s.io",
                                                     "volumesnapshotcontents.snapshot.storage.k8s.io"],
                      "ks_preinstall_present_namespaces": [*PRESENT, "kube-node-lease"]}),
}


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("preinstall-role")
    tasks: list[dict[str, Any]] = []
    for name, (changes, extra) in SCENARIOS.items():
        tasks += [{"ansible.builtin.include_role": {"name": "preinstall", "tasks_from": "render"},
                   "vars": {**apply_defaults(changes), **extra}},
                  {"ansible.builtin.copy": {"content": "{{ ks_preinstall_objects | to_json }}",
                                            "dest": str(out / f"{name}.json")}}]
    run_play({"hosts": "localhost", "gather_facts": False, "roles": ["kubesphere-defaults"], "tasks": tasks,
              "vars": {**engine_vars("preinstall"), "nodeNum": 1}}, out)
    return out


def objects(out: Path, name: str) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    found = json.loads((out / f"{name}.json").read_text())
    return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in found}


def pod(out: Path, name: str) -> dict[str, Any]:
    return objects(out, name)[("StatefulSet", "kube-system", "snapshot-controller")]["spec"]["template"]["spec"]


def test_renders_upstreams_objects_except_kubesphere_system(out: Path) -> None:
    """Upstream's objects, less the namespace of the installer manifest (only labelled when present)."""
    rendered = objects(out, "fresh")
    upstream = {(o["kind"], o["namespace"], o["name"]) for o in UPSTREAM["objects"]}
    assert set(rendered) == upstream - {("Namespace", None, "kubesphere-system")}
    assert {o["apiVersion"] for o in rendered.values()} <= {o["apiVersion"] for o in UPSTREAM["objects"]}


def test_namespaces_labelled_like_upstream(out: Path) -> None:
    rendered = objects(out, "default")
    names = [n for kind, _, n in rendered if kind == "Namespace"]
    assert names == [*CREATED, "kubesphere-system", "default", "kube-public", "kube-system"]
    for name in names:
        assert rendered[("Namespace", None, name)]["metadata"]["labels"] == {
            "kubesphere.io/workspace": "system-workspace", "kubesphere.io/namespace": name}


def test_kube_node_lease_labelled_only_when_present(out: Path) -> None:
    assert ("Namespace", None, "kube-node-lease") not in objects(out, "default")
    assert ("Namespace", None, "kube-node-lease") in objects(out, "csi_crds")


def test_snapshot_crds(out: Path) -> None:
    crds = {n: o for (kind, _, n), o in objects(out, "default").items() if kind == "CustomResourceDefinition"}
    assert set(crds) == SNAPSHOT_CRDS
    scopes = {n: c["spec"]["scope"] for n, c in crds.items()}
    assert scopes == {"volumesnapshotclasses.snapshot.storage.k8s.io": "Cluster",
                      "volumesnapshotcontents.snapshot.storage.k8s.io": "Cluster",
                      "volumesnapshots.snapshot.storage.k8s.io": "Namespaced"}
    for name, crd in crds.items():
        assert crd["metadata"]["annotations"]["api-approved.kubernetes.io"].startswith("https://github.com/")
        assert crd["spec"]["names"]["plural"] + ".snapshot.storage.k8s.io" == name
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        assert [(v["served"], v["storage"]) for v in versions.values()] == [(True, True), (True, False)]
        assert versions["v1beta1"]["deprecated"] is True
        has_status = name != "volumesnapshotclasses.snapshot.storage.k8s.io"
        assert all(("status" in v["subresources"]) is has_status for v in versions.values())
        assert versions["v1"]["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] is True


def test_crd_filter_takes_annotations_deprecation_and_subresources() -> None:
    """What the snapshot CRDs need of kubesphere-defaults' ks_structural_crd beyond columns and categories."""
    crd = filter_plugins("kubesphere-defaults", "ks_crds").ks_structural_crd({
        "group": "g.io", "kind": "K", "plural": "ks", "singular": "k", "scope": "Cluster",
        "annotations": {"a": "b"}, "columns": [["Age", "date", ".metadata.creationTimestamp"]],
        "versions": [{"name": "v1", "storage": True, "status": True, "subresources": {}},
                     {"name": "v1beta1", "storage": False, "status": True, "deprecated": True,
                      "deprecationWarning": "use v1"}]})
    assert crd["metadata"] == {"name": "ks.g.io", "annotations": {"a": "b"}}
    v1, v1beta1 = crd["spec"]["versions"]
    assert v1["subresources"] == {} and "deprecated" not in v1
    assert v1beta1["subresources"] == {"status": {}}
    assert (v1beta1["deprecated"], v1beta1["deprecationWarning"]) == (True, "use v1")
    assert v1["additionalPrinterColumns"] == v1beta1["additionalPrinterColumns"]


def test_crds_of_the_clusters_csi_driver_are_left_alone(out: Path) -> None:
    crds = [n for kind, _, n in objects(out, "csi_crds") if kind == "CustomResourceDefinition"]
    assert crds == ["volumesnapshotclasses.snapshot.storage.k8s.io"]


def test_snapshot_controller(out: Path) -> None:
    rendered = objects(out, "default")
    sts = rendered[("StatefulSet", "kube-system", "snapshot-controller")]
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["serviceName"] == "snapshot-controller"
    spec = sts["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "snapshot-controller"
    assert spec["containers"][0]["image"] == "csiplugin/snapshot-controller:v4.0.0"
    assert spec["containers"][0]["args"] == ["--v=5", "--leader-election=false"]
    assert not {"nodeSelector", "tolerations", "affinity"} & set(spec)
    binding = rendered[("ClusterRoleBinding", None, "snapshot-controller-role")]
    assert binding["roleRef"]["name"] == "snapshot-controller-runner"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "snapshot-controller",
                                    "namespace": "kube-system"}]
    runner = rendered[("ClusterRole", None, "snapshot-controller-runner")]
    assert {"volumesnapshots/status", "volumesnapshotcontents", "persistentvolumeclaims"} <= {
        r for rule in runner["rules"] for r in rule["resources"]}
    assert rendered[("RoleBinding", "kube-system", "snapshot-controller-leaderelection")]["roleRef"]["kind"] == "Role"


def test_registry_and_global_scheduling(out: Path) -> None:
    spec = pod(out, "registry")
    assert spec["containers"][0]["image"] == "reg.local:5000/mirror/snapshot-controller:v4.0.0"
    assert spec["nodeSelector"] == {"role": "infra"}
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in spec["affinity"]["nodeAffinity"]
    assert pod(out, "zone_cn")["containers"][0]["image"] == (
        "registry.cn-beijing.aliyuncs.com/kubesphereio/snapshot-controller:v4.0.0")


def test_not_owned_by() -> None:
    f = filter_plugins("preinstall", "preinstall")
    found = [{"metadata": {"name": "a", "labels": {"installer.kubesphere.io/module": "preinstall"}}},
             {"metadata": {"name": "b", "labels": {"installer.kubesphere.io/module": "ks-core"}}},
             {"metadata": {"name": "c", "labels": None}}, {"metadata": {"name": "d"}}]
    assert f.ks_not_owned_by(found, "preinstall") == ["b", "c", "d"]
