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
    "external_s3": {**ON, "common": {"s3": {"endpoint": "https://s3.example.com", "accessKeyID": "given-ak",
                                            "secretAccessKey": "given-sk"}}},
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


AK, SK = "KUBESPHERE_OPENPITRIX_S3_ACCESSKEYID", "KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY"


def test_the_job_takes_the_s3_keys_from_their_secret(rendered: dict[str, Objects]) -> None:
    """The variables kubesphere-config's openpitrix.s3 section names, from Secret minio, or from the Secret ks-core
    keeps an external S3's keys in."""
    for scenario, secret in (("default", "minio"), ("external_s3", "kubesphere-s3")):
        init = pod(rendered[scenario], "Job", "openpitrix-import-job")["initContainers"][1]
        assert init["name"] == "resolve-config" and init["command"][0] == "awk"  # no shell
        env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in init["env"]}
        assert env == {AK: {"name": secret, "key": "accesskey", "optional": True},
                       SK: {"name": secret, "key": "secretkey", "optional": True}}, scenario
        assert init["command"][1:3] == ["-v", f"names={AK} {SK}"]


def _resolve(rendered: dict[str, Objects], tmp_path: Path, source: str, env: dict[str, str]) -> str:
    """The Job's resolve-config init container (its real awk program) run on ``source`` with ``env``."""
    init = pod(rendered["default"], "Job", "openpitrix-import-job")["initContainers"][1]
    given, written = tmp_path / "kubesphere.yaml", tmp_path / "out.yaml"
    given.write_text(source)
    command = [f"out={written}" if a == "out=/etc/kubesphere/kubesphere.yaml" else a for a in init["command"]]
    assert command[-1] == "/config/kubesphere.yaml" and f"out={written}" in command
    command[-1] = str(given)
    subprocess.run(command, env={"PATH": "/usr/bin:/bin", **env}, check=True, timeout=30)
    return written.read_text()


HOSTILE = {
    "sed and shell": {AK: 'a&b\\1|/"$(id)', SK: "x*y.[z]^$"},
    # each key holds the other's placeholder: a value is never scanned again, whichever comes first
    "placeholders": {AK: f"{SK}&&", SK: f"{AK}{SK}"},
    "quotes, backslashes, line breaks": {AK: 'line1\nline2: "q" \'s\' \\ end\\',
                                         SK: "\ttab\r\x01\x7f # no comment\n"},
    "empty": {AK: "", SK: " "},
}


@pytest.mark.parametrize("values", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_import_reads_the_keys_not_their_variable_names(rendered: dict[str, Objects], tmp_path: Path,
                                                            values: dict[str, str]) -> None:
    """openpitrix-jobs reads kubesphere.yaml without environment overrides: the init container writes the Job's
    copy with the values of the variables kubesphere-config names, as YAML that reads back as exactly those values
    (in one pass: a value holding a placeholder is not touched again), whatever they hold."""
    s3 = {"endpoint": "http://minio.kubesphere-system.svc:9000", "bucket": "app-store", "accessKeyID": AK,
          "secretAccessKey": SK}
    # as ks-config writes kubesphere.yaml (plain scalars); a flow sequence puts both placeholders on one line
    source = yaml.safe_dump({"ldap": {"managerPassword": "KUBESPHERE_LDAP_MANAGERPASSWORD"},
                             "openpitrix": {"s3": s3}}, default_flow_style=False, indent=2, sort_keys=False)
    source += f"both: [{SK}, {AK}, {SK}]\n"
    config = yaml.safe_load(_resolve(rendered, tmp_path, source, values))
    assert config["openpitrix"]["s3"] == {**s3, "accessKeyID": values[AK], "secretAccessKey": values[SK]}
    assert config["both"] == [values[SK], values[AK], values[SK]]
    assert config["ldap"]["managerPassword"] == "KUBESPHERE_LDAP_MANAGERPASSWORD"  # not the Job's business


def test_an_unset_variable_leaves_its_placeholder(rendered: dict[str, Objects], tmp_path: Path) -> None:
    """Without the Secret (or a key of it) the variable is unset, and the file keeps the placeholder."""
    source = f"openpitrix:\n  s3:\n    accessKeyID: {AK}\n    secretAccessKey: {SK}\n"
    assert _resolve(rendered, tmp_path, source, {}) == source
    assert yaml.safe_load(_resolve(rendered, tmp_path, source, {SK: "sk"}))["openpitrix"]["s3"] == {
        "accessKeyID": AK, "secretAccessKey": "sk"}


def test_spec_changes_change_the_jobs_digest(rendered: dict[str, Objects]) -> None:
    digests = {name: find(objects, "Job", "openpitrix-import-job")["metadata"]["annotations"][DIGEST]
               for name, objects in rendered.items()}
    assert len(set(digests.values())) == len(digests)
    assert pod(rendered["scheduling"], "Job", "openpitrix-import-job")["nodeSelector"] == {"pool": "infra"}
    image = pod(rendered["registry"], "Job", "openpitrix-import-job")["containers"][0]["image"]
    assert image == "registry.local:5000/kubesphere/openpitrix-jobs:v3.3.2"
