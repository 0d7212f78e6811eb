"""The openpitrix role's manifests (App Store import Job and built-in repository), rendered by Ansible."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from role_harness import Objects, find, keys, pod, render_scenarios

from installer.config.defaults import apply_defaults

REPO = Path(__file__).resolve().parents[2]
ON = {"openpitrix": {"store": {"enabled": True}}}
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": ON,
    "scheduling": {**ON, "nodeSelector": {"pool": "infra"}, "tolerations": [{"operator": "Exists"}]},
    "registry": {**ON, "local_registry": "registry.local:5000"},
}
DIGEST = "installer.kubesphere.io/spec-hash"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Objects]:
    scenarios = {name: apply_defaults(changes) for name, changes in SCENARIOS.items()}
    return render_scenarios("openpitrix", "ks_openpitrix_objects", scenarios, tmp_path_factory.mktemp("openpitrix"))


def test_objects_are_upstreams(rendered: dict[str, Objects]) -> None:
    objects = json.loads((REPO / "tests" / "parity" / "upstream" / "openpitrix.json").read_text())["objects"]
    for name, rendered_objects in rendered.items():
        assert keys(rendered_objects) == {(o["kind"], o["namespace"] or "", o["name"]) for o in objects}, name
    repo = find(rendered["default"], "HelmRepo", "builtin-stable")
    assert repo["spec"] == {"credential": {}, "name": "built-stable", "syncPeriod": 3600,
                            "url": "https://charts.kubesphere.io/stable"}
    assert repo["metadata"]["labels"] == {"kubesphere.io/workspace": "system-workspace"}


def test_import_job_as_upstream(rendered: dict[str, Objects]) -> None:
    job = find(rendered["default"], "Job", "openpitrix-import-job")
    assert job["spec"]["backoffLimit"] == 100
    spec = pod(rendered["default"], "Job", "openpitrix-import-job")
    assert spec["serviceAccountName"] == "kubesphere" and spec["restartPolicy"] == "OnFailure"
    assert spec["initContainers"][0]["image"] == spec["containers"][0]["image"] == "kubesphere/openpitrix-jobs:v3.3.2"
    assert spec["containers"][0]["command"] == ["import-app", "import"]
    assert spec["volumes"] == [{"name": "kubesphere-config", "configMap": {"name": "kubesphere-config"}}]


def test_spec_changes_change_the_jobs_digest(rendered: dict[str, Objects]) -> None:
    digests = {name: find(objects, "Job", "openpitrix-import-job")["metadata"]["annotations"][DIGEST]
               for name, objects in rendered.items()}
    assert len(set(digests.values())) == len(digests)
    assert pod(rendered["scheduling"], "Job", "openpitrix-import-job")["nodeSelector"] == {"pool": "infra"}
    image = pod(rendered["registry"], "Job", "openpitrix-import-job")["containers"][0]["image"]
    assert image == "registry.local:5000/kubesphere/openpitrix-jobs:v3.3.2"
