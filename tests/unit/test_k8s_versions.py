"""The simulated cluster's control plane at a chosen Kubernetes version: flags per version, the tools a cluster
runs, and the wrapper Go module that builds it (hack/k8s_versions.py, hack/control_plane_module.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HACK = Path(__file__).resolve().parents[2] / "hack"
sys.path.insert(0, str(HACK))

import control_plane_module as cpm  # noqa: E402
import k8s_versions as kv  # noqa: E402

PINNED = {"KUBERNETES_VERSION": "v1.34.4", "KWOK_VERSION": "v0.8.0", "ETCD_VERSION": "v3.6.4",
          "HELM_VERSION": "v3.19.5", "SHELL_OPERATOR_VERSION": "v1.6.1", "METRICS_SERVER_VERSION": "v0.8.0"}


def test_volumes_are_kwoks_from_1_24_and_the_controller_managers_hostpath_ones_before() -> None:
    stages = ("\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: pod-ready\nspec:\n"
              "  resourceRef: {apiGroup: v1, kind: Pod}\n"
              "---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: pvc-provision\nspec:\n"
              "  resourceRef: {apiGroup: v1, kind: PersistentVolumeClaim}\n  steps:\n  - apply:\n"
              "      template: |\n        kind: PersistentVolume\n"
              "---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: pv-bind\nspec:\n"
              "  resourceRef: {apiGroup: v1, kind: PersistentVolume}\n")
    assert kv.kwok_stages_for(stages, "v1.24.17") == stages
    assert kv.volume_provisioner("v1.24.17") == "kwok.x-k8s.io/volume"
    assert "--enable-hostpath-provisioner=true" not in kv.controller_manager_flags("v1.24.17")
    old = kv.kwok_stages_for(stages, "v1.23.17")
    assert "name: pod-ready" in old and "PersistentVolume" not in old
    assert kv.volume_provisioner("v1.23.17") == "kubernetes.io/host-path"
    assert "--enable-hostpath-provisioner=true" in kv.controller_manager_flags("v1.21.14")


@pytest.mark.parametrize(("version", "controllers", "insecure_port_off"), [
    ("v1.21.14", "*,-cloud-node-lifecycle,-service,-route", True),
    ("v1.22.17", "*,-cloud-node-lifecycle,-service,-route", False),
    ("v1.26.15", "*,-cloud-node-lifecycle,-service,-route", False),
    ("v1.27.16", "*,-cloud-node-lifecycle,-service,-route", False),
    ("v1.28.15", "*,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller", False),
    ("v1.34.4", "*,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller", False),
])
def test_controller_manager_flags_name_the_versions_controllers(version: str, controllers: str,
                                                                insecure_port_off: bool) -> None:
    flags = kv.controller_manager_flags(version)
    assert f"--controllers={controllers}" in flags
    assert ("--port=0" in flags) is insecure_port_off


@pytest.mark.parametrize(("version", "flags"), [
    ("v1.21.14", ["--port=0"]), ("v1.22.17", ["--port=0"]), ("v1.23.17", []), ("v1.26.15", []), ("v1.34.4", []),
])
def test_scheduler_turns_off_its_insecure_port_where_it_has_one(version: str, flags: list[str]) -> None:
    assert kv.scheduler_flags(version) == flags


@pytest.mark.parametrize("bad", ["1.26", "v1.26.x", "latest", "v1.20.15", "v1.19.7"])
def test_a_version_it_cannot_run_is_refused_with_the_reason(bad: str) -> None:
    with pytest.raises(ValueError, match=r"not a Kubernetes version|older than v1\.21"):
        kv.parse(bad)


def test_the_chosen_version_moves_only_the_control_plane() -> None:
    env = {kv.ENV: "1.26.15"}
    chosen = kv.cluster_version(PINNED, env)
    assert chosen == "v1.26.15"
    assert [kv.tool_version(t, PINNED, chosen) for t in kv.CONTROL_PLANE] == ["v1.26.15"] * 3
    assert kv.tool_version("kubectl", PINNED, chosen) == "v1.34.4"
    assert kv.tool_version("etcd", PINNED, chosen) == "v3.6.4"
    assert kv.tool_version("kwok", PINNED, chosen) == "v0.8.0"
    assert kv.cluster_version(PINNED, {}) == "v1.34.4"
    assert kv.cluster_version(PINNED, {kv.ENV: " "}) == "v1.34.4"


def test_build_tools_reads_the_choice_from_the_environment() -> None:
    script = HACK / "k8s_versions.py"
    run = subprocess.run([sys.executable, str(script), "kubernetes"], capture_output=True, text=True,
                         env={kv.ENV: "v1.23.17"}, check=False)
    assert (run.returncode, run.stdout) == (0, "v1.23.17\n")
    run = subprocess.run([sys.executable, str(script), "kubernetes"], capture_output=True, text=True,
                         env={kv.ENV: "v1.18.20"}, check=False)
    assert run.returncode == 2 and "older than v1.21" in run.stderr


KUBERNETES_MOD = """module k8s.io/kubernetes

go 1.19

require (
\tgithub.com/spf13/cobra v1.6.0
\tk8s.io/api v0.0.0
\tk8s.io/controller-manager v0.0.0
\t// k8s.io/commented v0.0.0
)

require k8s.io/klog/v2 v2.80.1 // indirect

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/controller-manager => ./staging/src/k8s.io/controller-manager
\tk8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
)
"""


def test_staging_modules_are_those_required_and_replaced_locally() -> None:
    assert cpm.staging_modules(KUBERNETES_MOD) == ["k8s.io/api", "k8s.io/controller-manager"]
    assert cpm.staging_version("v1.26.15") == "v0.26.15"


def test_a_patch_the_proxy_refuses_falls_back_to_the_nearest_older_one() -> None:
    served = {("k8s.io/api", "v0.26.15"), ("k8s.io/controller-manager", "v0.26.13"),
              ("k8s.io/controller-manager", "v0.26.1")}
    asked: list[str] = []

    def is_served(module: str, version: str) -> bool:
        asked.append(version)
        return (module, version) in served

    assert cpm.nearest_served("k8s.io/api", "v0.26.15", is_served) == "v0.26.15"
    asked.clear()
    assert cpm.nearest_served("k8s.io/controller-manager", "v0.26.15", is_served) == "v0.26.13"
    assert asked == ["v0.26.15", "v0.26.14", "v0.26.13"]
    assert cpm.nearest_served("k8s.io/kube-proxy", "v0.26.2", is_served) is None


def test_the_wrapper_module_requires_kubernetes_and_pins_each_staging_module() -> None:
    text = cpm.go_mod("v1.26.15", {"k8s.io/api": "v0.26.15", "k8s.io/controller-manager": "v0.26.13"})
    assert "require k8s.io/kubernetes v1.26.15\n" in text
    assert "replace k8s.io/controller-manager => k8s.io/controller-manager v0.26.13\n" in text
    assert text.startswith(f"module {cpm.MODULE}\n")


def test_openapi_inputs_are_the_tagged_packages_as_kubernetes_build_finds_them(tmp_path: Path) -> None:
    files = {
        "pkg/apis/abac/v1beta1/doc.go": "// +k8s:deepcopy-gen=package\n// +k8s:openapi-gen=true\npackage v1beta1\n",
        "pkg/apis/off/doc.go": "// +k8s:openapi-gen=false\npackage off\n",
        "pkg/apis/untagged/doc.go": "// +k8s:deepcopy-gen=package\npackage untagged\n",
        "pkg/apis/prose/doc.go": "// Package prose mentions +k8s:openapi-gen= in a sentence.\npackage prose\n",
        "vendor/x/doc.go": "// +k8s:openapi-gen=true\npackage x\n",
        "_output/y/doc.go": "// +k8s:openapi-gen=true\npackage y\n",
        "doc.go": "// +k8s:openapi-gen=true\npackage root\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert cpm.openapi_packages(tmp_path, "k8s.io/kubernetes") == [
        "k8s.io/kubernetes", "k8s.io/kubernetes/pkg/apis/abac/v1beta1", "k8s.io/kubernetes/pkg/apis/off"]


def test_generated_openapi_must_report_the_violations_kubernetes_knows(tmp_path: Path) -> None:
    known = tmp_path / "violation_exceptions.list"
    known.write_text("API rule violation: list_type_missing,k8s.io/api/core/v1,PodSpec,Volumes\n"
                     "API rule violation: names_match,k8s.io/api/core/v1,Capabilities,Add\n")
    report = tmp_path / "report"
    report.write_text("".join(reversed(known.read_text().splitlines(keepends=True))))
    cpm.check_violations(report, known)
    report.write_text("API rule violation: names_match,k8s.io/api/core/v1,Capabilities,Add\n")
    with pytest.raises(SystemExit, match="0 more, 1 missing"):
        cpm.check_violations(report, known)


def test_versions_before_1_23_get_the_json_library_that_runs_on_current_go() -> None:
    old = cpm.go_mod("v1.21.14", {})
    assert "require github.com/modern-go/reflect2 v1.0.2\n" in old
    assert "require github.com/json-iterator/go v1.1.12\n" in old
    assert "reflect2" not in cpm.go_mod("v1.23.17", {})
