"""The minio module (role minio) through the engine on the simulated cluster: install for the App Store (the bucket
Job completes), a volume size change, an external S3 (minio goes; its PVC and credentials stay), the reinstall
with the same credentials, and a repair after the Deployment and the Job were deleted by hand."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_objects import delete_quietly
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.engine.plays import module_plays
from installer.modules import get_module

from .conftest import REPO, Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS = "kubesphere-system"
SECRET = "minio"
JOB = "minio-make-bucket-job"
HOOK = REPO / "hooks" / "kubesphere" / "installRunner.py"
WORKLOAD = {f"{kind}/{NS}/{name}" for kind, name in (
    ("ConfigMap", "minio"), ("Deployment", "minio"), ("Service", "minio"), ("ServiceAccount", "ks-minio"))}
KEPT = {f"Secret/{NS}/{SECRET}"}
SKIPPED = ("ks-core", "ks-config", "monitoring", "openpitrix")
STORE = {"store": {"enabled": True}}
S3 = {"endpoint": "http://s3.example.com:9000", "region": "us-east-1", "disableSSL": True,
      "forcePathStyle": True, "accessKeyID": "ak", "secretAccessKey": "sk"}


def _clean(api: client.ApiClient) -> None:
    """Remove what the module leaves behind (the Secret and the PVC) and any object of an earlier run."""
    core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
    delete_quietly(lambda: batch.delete_namespaced_job(JOB, NS, propagation_policy="Background"),
                   lambda: apps.delete_namespaced_deployment("minio", NS),
                   lambda: core.delete_namespaced_service("minio", NS),
                   lambda: core.delete_namespaced_config_map("minio", NS),
                   lambda: core.delete_namespaced_service_account("ks-minio", NS),
                   lambda: core.delete_namespaced_secret(SECRET, NS),
                   lambda: core.delete_namespaced_persistent_volume_claim("minio", NS))


def playbooks_without_core(tmp_path: Path, wait_timeout: int | None = None) -> Path:
    """A directory of plays where ks-core's, ks-config's, monitoring's and openpitrix's do nothing: minio needs none of
    them, and their waits would be most of this test's time (their own tests cover them). ``wait_timeout``: the seconds
    minio waits for its Deployment and its Job."""
    playbooks = tmp_path / f"playbooks-{wait_timeout}"
    playbooks.mkdir(exist_ok=True)
    for module in SKIPPED:
        for action in ("", "-uninstall"):
            play = [{"name": f"Skip {module}", "hosts": "localhost", "gather_facts": False, "tasks": []}]
            (playbooks / f"{module}{action}.yaml").write_text(yaml.safe_dump(play))
    if wait_timeout is not None:
        play = module_plays(get_module("minio"))
        play[0]["vars"] = {"ks_minio_wait_timeout": wait_timeout}
        (playbooks / "minio.yaml").write_text(yaml.safe_dump(play))
    return playbooks


@pytest.fixture
def minio(installer: Installer, tmp_path: Path) -> Iterator[Installer]:
    _clean(installer.api)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_without_core(tmp_path))
    yield installer
    _clean(installer.api)


def credentials(api: client.ApiClient) -> tuple[dict[str, str], str]:
    """The stored credentials and the Secret's resourceVersion."""
    secret = client.CoreV1Api(api).read_namespaced_secret(SECRET, NS)
    return ({k: base64.b64decode(v).decode() for k, v in secret.data.items()}, secret.metadata.resource_version)


def job(api: client.ApiClient) -> client.V1Job:
    return client.BatchV1Api(api).read_namespaced_job(JOB, NS)


def pvc_size(api: client.ApiClient) -> str:
    return client.CoreV1Api(api).read_namespaced_persistent_volume_claim("minio", NS).spec.resources.requests[
        "storage"]


def drift_tick(installer: Installer, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """One schedule event of the hook with a drift check due, as shell-operator runs it."""
    context = tmp_path / "context.json"
    context.write_text(json.dumps([{"binding": "Retry failed modules", "type": "Schedule"}]))
    return subprocess.run([sys.executable, str(HOOK)],
                          env=installer.environ(BINDING_CONTEXT_PATH=str(context), KS_DRIFT_INTERVAL="0"),
                          capture_output=True, text=True, timeout=600, check=False)


def test_minio_install_resize_external_s3_reinstall_and_repair(minio: Installer, tmp_path: Path) -> None:
    api = minio.api
    apps = client.AppsV1Api(api)
    # What a failed hook of the original installer left: an unlabelled Job of that name, replaced by the role's.
    client.BatchV1Api(api).create_namespaced_job(NS, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": JOB, "labels": {"heritage": "Helm"}},
        "spec": {"backoffLimit": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "minio-mc", "image": "minio/mc:old", "command": ["false"]}]}}}})
    minio.apply_cc(openpitrix=STORE, common__minio={"volumeSize": "2Gi"})
    assert "minio" in minio.reconcile_ok()
    assert set(minio.module_objects()["minio"]) == WORKLOAD | KEPT
    assert apps.read_namespaced_deployment("minio", NS).status.available_replicas == 1
    first = job(api)
    assert first.status.succeeded == 1
    assert first.metadata.labels["installer.kubesphere.io/module"] == "minio"
    assert first.spec.template.spec.containers[0].image == "minio/mc:RELEASE.2019-08-07T23-14-43Z"
    assert pvc_size(api) == "2Gi"
    pvc = client.CoreV1Api(api).read_namespaced_persistent_volume_claim("minio", NS)
    assert pvc.metadata.labels["installer.kubesphere.io/module"] == "minio"
    status = minio.status()
    assert status["minio"]["status"] == "enabled" and status["minio"]["enabledTime"]
    keys, version = credentials(api)
    assert sorted(keys) == ["accesskey", "secretkey"]
    assert len(keys["accesskey"]) == 20 and len(keys["secretkey"]) == 40
    assert all(v.isalpha() for v in keys.values()) and "openpitrixminio" not in keys["accesskey"]
    log = (minio.results / "minio" / "stdout").read_text()
    assert not any(v in log for v in keys.values())
    env = {e.name: e for e in apps.read_namespaced_deployment("minio", NS).spec.template.spec.containers[0].env}
    assert env["MINIO_SECRET_KEY"].value_from.secret_key_ref.name == SECRET and env["MINIO_SECRET_KEY"].value is None

    # A new volume size: only minio re-runs; the existing volume, the credentials and the complete Job stay.
    minio.apply_cc(openpitrix=STORE, common__minio={"volumeSize": "5Gi"})
    proc = minio.reconcile()
    assert proc.returncode == 0 and minio.ran(proc) == ["minio"], proc.stderr
    assert pvc_size(api) == "2Gi"
    assert credentials(api) == (keys, version)
    assert job(api).metadata.uid == first.metadata.uid

    # A new registry zone changes the Job's image: the complete Job is replaced and runs again.
    minio.apply_cc(openpitrix=STORE, common__minio={"volumeSize": "5Gi"}, zone="cn")
    assert "minio" in minio.reconcile_ok()
    second = job(api)
    assert second.metadata.uid != first.metadata.uid and second.status.succeeded == 1
    assert second.spec.template.spec.containers[0].image.startswith("registry.cn-beijing.aliyuncs.com/")
    assert credentials(api) == (keys, version)

    # `kubectl delete deploy,job` by hand: the drift check re-applies minio, which recreates both.
    apps.delete_namespaced_deployment("minio", NS)
    client.BatchV1Api(api).delete_namespaced_job(JOB, NS, propagation_policy="Background")
    proc = drift_tick(minio, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Drift in minio: " in proc.stderr and minio.ran(proc) == ["minio"], proc.stderr
    assert apps.read_namespaced_deployment("minio", NS).status.available_replicas == 1
    assert job(api).status.succeeded == 1 and job(api).metadata.uid != second.metadata.uid
    assert credentials(api) == (keys, version)

    # Nothing needs minio any more: it is uninstalled; the volume and the credentials of its data stay.
    minio.apply_cc(openpitrix={"store": {"enabled": False}}, common__minio={"volumeSize": "5Gi"})
    assert "minio" in minio.reconcile_ok()
    assert_uninstalled(minio)

    # The App Store again: the same volume and credentials; the bucket Job runs again.
    minio.apply_cc(openpitrix=STORE, common__minio={"volumeSize": "5Gi"})
    assert "minio" in minio.reconcile_ok()
    assert set(minio.module_objects()["minio"]) == WORKLOAD | KEPT
    assert job(api).status.succeeded == 1
    assert pvc_size(api) == "2Gi"
    assert credentials(api) == (keys, version)
    assert minio.status()["minio"]["status"] == "enabled"

    # No node matches: the wait ends in a failed phase that names the Deployment.
    playbooks = minio.env["KS_PLAYBOOKS_DIR"]
    minio.env["KS_PLAYBOOKS_DIR"] = str(playbooks_without_core(tmp_path, 4))
    minio.apply_cc(openpitrix=STORE, common__minio={"volumeSize": "5Gi", "nodeSelector": {"ks-test": "nowhere"}})
    assert minio.reconcile().returncode != 0
    minio.env["KS_PLAYBOOKS_DIR"] = playbooks
    module = minio.status()["modules"]["minio"]
    assert module["phase"] == "Failed", module
    assert "Deployment/kubesphere-system/minio" in module["message"], module

    # An external S3: minio is uninstalled (the App Store uses that S3 instead).
    minio.apply_cc(openpitrix=STORE, common__minio={"volumeSize": "5Gi"}, common__s3=S3)
    assert "minio" in minio.reconcile_ok()
    assert_uninstalled(minio)
    assert credentials(api) == (keys, version)


def assert_uninstalled(minio: Installer) -> None:
    assert set(minio.module_objects().get("minio", {})) == KEPT
    with pytest.raises(ApiException):
        job(minio.api)
    assert pvc_size(minio.api) == "2Gi"
    assert "minio" not in minio.status()
    assert minio.status()["modules"]["minio"]["phase"] == "Uninstalled"
