"""The small platform modules through the engine on the simulated cluster, in one install: network (weave-scope),
openpitrix (the App Store's import Job and built-in repository, with an external S3) and telemetry (the cluster id
and the usage report, sent to the test session's receiver). Then each is switched off and network back on."""

from __future__ import annotations

import base64
import re
import urllib.parse

import pytest
from cluster_objects import delete_namespace, delete_quietly, eventually
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import MODULE_LABEL

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
WEAVE = "weave"
S3 = {"endpoint": "http://s3.example.com:9000", "region": "us-east-1", "disableSSL": True,
      "forcePathStyle": True, "accessKeyID": "external-access-key", "secretAccessKey": "external-secret-key"}
REPO = ("application.kubesphere.io", "v1alpha1", "helmrepos", "builtin-stable")


def kubesphere_yaml(installer: Installer) -> str:
    return client.CoreV1Api(installer.api).read_namespaced_config_map(
        "kubesphere-config", "kubesphere-system").data["kubesphere.yaml"]


def builtin_repo(installer: Installer) -> dict | None:
    try:
        return installer.custom.get_cluster_custom_object(*REPO)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def import_job(installer: Installer) -> client.V1Job | None:
    try:
        return client.BatchV1Api(installer.api).read_namespaced_job("openpitrix-import-job", "kubesphere-system")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def upstream_import_job(installer: Installer) -> client.V1Job:
    """The import Job as upstream v3.4.1 left it (``kubectl apply`` of ks-openpitrix-import.yaml): no module label,
    written by kubectl, a pod template unlike the render's."""
    labels = {"app": "openpitrix", "component": "openpitrix-import-job", "version": "v3.3.2"}
    image = "kubesphere/openpitrix-jobs:v3.3.2"
    pod = {"serviceAccountName": "kubesphere", "restartPolicy": "OnFailure",
           "initContainers": [{"name": "wait-apiserver", "image": image, "command": ["sh", "-c", "true"]}],
           "containers": [{"name": "import", "image": image, "command": ["import-app", "import"],
                           "volumeMounts": [{"mountPath": "/etc/kubesphere", "name": "kubesphere-config"}]}],
           "volumes": [{"name": "kubesphere-config", "configMap": {"name": "kubesphere-config"}}]}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "openpitrix-import-job", "namespace": "kubesphere-system", "labels": labels},
           "spec": {"backoffLimit": 100, "template": {"metadata": {"labels": labels}, "spec": pod}}}
    batch = client.BatchV1Api(installer.api)
    # An earlier test on this cluster (the installer fixture forgets a module, it does not uninstall it) may have left
    # the render's Job: gone first, as on a cluster upstream installed.
    delete_quietly(lambda: batch.delete_namespaced_job("openpitrix-import-job", "kubesphere-system",
                                                      propagation_policy="Background"))
    eventually(lambda: import_job(installer) is None, what="the earlier import Job gone")
    return batch.create_namespaced_job("kubesphere-system", job, field_manager="kubectl-client-side-apply")


def assert_topology(installer: Installer) -> None:
    apps = client.AppsV1Api(installer.api)
    for name in ("weave-scope-app", "weave-scope-cluster-agent"):
        assert apps.read_namespaced_deployment(name, WEAVE).status.available_replicas == 1, name
    assert apps.read_namespaced_daemon_set("weave-scope-agent", WEAVE)
    assert installer.status()["network"]["topology"]["status"] == "enabled"
    assert "weaveScopeHost: weave-scope-app.weave" in kubesphere_yaml(installer)


def test_network_openpitrix_and_telemetry(installer: Installer, telemetry_receiver: list[str]) -> None:
    delete_namespace(installer.api, WEAVE)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    on = {"network": {"topology": {"type": "weave-scope"}}, "openpitrix": {"store": {"enabled": True}},
          "common__s3": S3, "telemetry_enabled": True}
    installer.apply_cc(**on)
    # A switch from upstream: its import Job is there. The first reconcile takes it over and makes it again with the
    # render's pod template (a Job's cannot change), as upstream's delete and apply did; no retry.
    upstream = upstream_import_job(installer)
    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    ran = installer.ran(proc)
    assert {"network", "openpitrix", "telemetry"} <= set(ran) and "minio" not in ran
    assert installer.status()["modules"]["openpitrix"]["phase"] == "Installed"
    assert not [line for line in proc.stderr.splitlines() if "openpitrix" in line and "fail" in line.lower()]
    assert_topology(installer)

    repo = builtin_repo(installer)
    assert repo and repo["spec"]["url"] == "https://charts.kubesphere.io/stable"
    assert repo["metadata"]["labels"]["installer.kubesphere.io/module"] == "openpitrix"
    job = import_job(installer)
    assert job and job.spec.template.spec.containers[0].command == ["import-app", "import"]
    assert job.metadata.uid != upstream.metadata.uid and job.metadata.labels[MODULE_LABEL] == "openpitrix"
    assert [c.name for c in job.spec.template.spec.init_containers] == ["wait-apiserver", "resolve-config"]
    # The external S3's keys: in Secret kubesphere-s3, named by variable in kubesphere.yaml, never written there.
    keys = client.CoreV1Api(installer.api).read_namespaced_secret("kubesphere-s3", "kubesphere-system").data
    assert {k: base64.b64decode(v).decode() for k, v in keys.items()} == {
        "accesskey": S3["accessKeyID"], "secretkey": S3["secretAccessKey"]}
    config = kubesphere_yaml(installer)
    assert S3["accessKeyID"] not in config and S3["secretAccessKey"] not in config
    assert "KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY" in config
    pod = job.spec.template.spec
    refs = {e.name: e.value_from.secret_key_ref.name for c in [*(pod.init_containers or []), *pod.containers]
            for e in c.env or [] if e.value_from and e.value_from.secret_key_ref}
    assert refs.get("KUBESPHERE_OPENPITRIX_S3_SECRETACCESSKEY") == "kubesphere-s3", refs
    assert "openpitrix" not in installer.status()  # upstream wrote no status for the App Store

    cluster_id = installer.status()["clusterId"]
    assert re.fullmatch(r"[0-9a-f-]{36}-\d+", cluster_id)
    reports = [urllib.parse.parse_qs(urllib.parse.urlsplit(p).query) for p in telemetry_receiver]
    sent = next(r for r in reports if r["clusterId"] == [cluster_id])
    assert sent["c"] == [str(len(client.CoreV1Api(installer.api).list_node().items))]
    assert "core" in sent["mod"][0].split("-") and sent["multi"] == ["none"]

    off = {"network": {"topology": {"type": "none"}}, "openpitrix": {"store": {"enabled": False}},
           "common__s3": S3, "telemetry_enabled": False}
    installer.apply_cc(**off)
    assert {"network", "openpitrix", "telemetry", "ks-config"} <= set(installer.reconcile_ok())
    assert installer.leftovers("network", "openpitrix") == set()
    rbac = client.RbacAuthorizationV1Api(installer.api)
    assert "weave-scope" not in {r.metadata.name for r in rbac.list_cluster_role().items}
    assert builtin_repo(installer) is None and import_job(installer) is None
    status = installer.status()
    assert "topology" not in status.get("network", {}) and status["clusterId"] == cluster_id
    assert "weaveScopeHost" not in kubesphere_yaml(installer)

    # Topology again, after its namespace was deleted by hand while it was off.
    installer.apply_cc(**{**off, "network": on["network"]})
    assert installer.reconcile_ok() == ["ks-config", "network"]
    assert_topology(installer)
