"""The openpitrix role's manifests (App Store import Job and built-in repository), rendered by Ansible."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
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
    assert spec["volumes"] == [{"name": "kubesphere-config", "configMap": {"name": "kubesphere-config"}},
                               {"name": "config", "emptyDir": {"medium": "Memory"}}]
    assert spec["containers"][0]["volumeMounts"] == [{"mountPath": "/etc/kubesphere", "name": "config"}]


def test_the_import_reads_minios_keys_not_their_variable_names(rendered: dict[str, Objects], tmp_path: Path) -> None:
    """openpitrix-jobs reads kubesphere.yaml without environment overrides: its init container writes the Job's
    copy with the values of the variables kubesphere-config names (from Secret minio), as literal text, whatever
    they hold."""
    init = pod(rendered["default"], "Job", "openpitrix-import-job")["initContainers"][1]
    assert init["name"] == "resolve-config" and init["command"][0] == "awk"  # no shell
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in init["env"]}
    assert env == {"KUBESPHERE_OPENPITRIX_S3_ACCESSKEYID": {"name": "minio", "key": "accesskey", "optional": True},
                   "KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY": {"name": "minio", "key": "secretkey",
                                                                "optional": True}}
    source, written = tmp_path / "kubesphere.yaml", tmp_path / "out.yaml"
    s3 = {"endpoint": "http://minio.kubesphere-system.svc:9000", "bucket": "app-store",
          "accessKeyID": "KUBESPHERE_OPENPITRIX_S3_ACCESSKEYID",
          "secretAccessKey": "KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY"}
    source.write_text("ldap:\n  managerPassword: KUBESPHERE_LDAP_MANAGERPASSWORD\n"
                      f"openpitrix:\n  s3: {json.dumps(s3)}\n")
    command = [f"out={written}" if a == "out=/etc/kubesphere/kubesphere.yaml" else a for a in init["command"]]
    assert command[-1] == "/config/kubesphere.yaml" and f"out={written}" in command
    command[-1] = str(source)
    hostile = {"KUBESPHERE_OPENPITRIX_S3_ACCESSKEYID": 'a&b\\1|/"$(id)',
               "KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY": "KUBESPHERE_OPENPITRIX_S3_ACCESSKEYID&&"}
    subprocess.run(command, env={"PATH": "/usr/bin:/bin", **hostile}, check=True, timeout=30)
    config = yaml.safe_load(written.read_text())
    assert config["openpitrix"]["s3"] == {**s3, "accessKeyID": hostile["KUBESPHERE_OPENPITRIX_S3_ACCESSKEYID"],
                                          "secretAccessKey": hostile["KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY"]}
    assert config["ldap"]["managerPassword"] == "KUBESPHERE_LDAP_MANAGERPASSWORD"  # not the Job's business
    # Without Secret minio (an external S3: its keys are written as given), the file is copied as it is.
    subprocess.run(command, env={"PATH": "/usr/bin:/bin"}, check=True, timeout=30)
    assert written.read_text() == source.read_text()


def test_spec_changes_change_the_jobs_digest(rendered: dict[str, Objects]) -> None:
    digests = {name: find(objects, "Job", "openpitrix-import-job")["metadata"]["annotations"][DIGEST]
               for name, objects in rendered.items()}
    assert len(set(digests.values())) == len(digests)
    assert pod(rendered["scheduling"], "Job", "openpitrix-import-job")["nodeSelector"] == {"pool": "infra"}
    image = pod(rendered["registry"], "Job", "openpitrix-import-job")["containers"][0]["image"]
    assert image == "registry.local:5000/kubesphere/openpitrix-jobs:v3.3.2"
