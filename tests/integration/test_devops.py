"""The devops module through the engine on the simulated cluster, with an external S3 (so no MinIO): install (every
object of upstream's two releases, workloads ready, the S2I webhooks registered with the generated CA, the generated
Secrets kept out of the log), a Jenkins resources change that re-runs devops alone, uninstall (the CRDs, the Jenkins
volume and its Secret kept; status cleared), and enabling it again after the user deleted its namespace by hand."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_objects import delete_namespace
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from installer.engine import timeline
from installer.modules import get_module
from installer.settings import MODULE_LABEL

from .conftest import REPO, Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
NS, WORKER, ARGO = "kubesphere-devops-system", "kubesphere-devops-worker", "argocd"
S3 = {"endpoint": "http://s3.example.com:9000", "region": "us-east-1", "disableSSL": True, "forcePathStyle": True,
      "accessKeyID": "ak", "secretAccessKey": "sk"}
# Their own tests cover these; here they would be most of the time. devops needs only kubesphere-secret, namespace
# kubesphere-monitoring-system and the prometheus-operator CRDs (the fixture makes those that are missing).
SKIPPED = ("preinstall", "ks-core", "ks-config", "monitoring")
MONITOR_CRDS = {"servicemonitors": "ServiceMonitor", "prometheusrules": "PrometheusRule"}
KEPT_SECRETS = {f"Secret/{NS}/devops-jenkins", f"Secret/{NS}/s2i-webhook-server-cert"}


def _playbooks(tmp_path: Path) -> Path:
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir(exist_ok=True)
    for module in SKIPPED:
        for action in ("", "-uninstall"):
            play = [{"name": f"Skip {module}", "hosts": "localhost", "gather_facts": False, "tasks": []}]
            (playbooks / f"{module}{action}.yaml").write_text(yaml.safe_dump(play))
    return playbooks


def _monitor_crd(plural: str, kind: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.monitoring.coreos.com"},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _clean(api: client.ApiClient) -> None:
    """What an uninstall keeps (the volume, its Secret, the namespace) and any object of an earlier run."""
    delete_namespace(api, NS, WORKER, ARGO)
    admission = client.AdmissionregistrationV1Api(api)
    with contextlib.suppress(ApiException):
        admission.delete_mutating_webhook_configuration("mutating-webhook-configuration")
    with contextlib.suppress(ApiException):
        admission.delete_validating_webhook_configuration("validating-webhook-configuration")


@pytest.fixture
def devops(installer: Installer, tmp_path: Path) -> Iterator[Installer]:
    api = installer.api
    core, ext = client.CoreV1Api(api), client.ApiextensionsV1Api(api)
    _clean(api)
    made: list[str] = []
    try:
        core.read_namespaced_secret("kubesphere-secret", "kubesphere-system")
    except ApiException:
        core.create_namespaced_secret("kubesphere-system", {
            "metadata": {"name": "kubesphere-secret"},
            "stringData": {"secret": "test-jwt-key", "token": "test.admin.token"}})
        made.append("secret")
    with contextlib.suppress(ApiException):
        core.create_namespace({"metadata": {"name": "kubesphere-monitoring-system"}})
    for plural, kind in MONITOR_CRDS.items():
        with contextlib.suppress(ApiException):
            ext.create_custom_resource_definition(_monitor_crd(plural, kind))
            made.append(plural)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    installer.env["KS_PLAYBOOKS_DIR"] = str(_playbooks(tmp_path))
    yield installer
    _clean(api)
    if "secret" in made:
        core.delete_namespaced_secret("kubesphere-secret", "kubesphere-system")
    for plural in MONITOR_CRDS:
        if plural in made:
            ext.delete_custom_resource_definition(f"{plural}.monitoring.coreos.com")


EXTRA_KINDS = (("v1", "PersistentVolumeClaim"), ("batch/v1", "CronJob"),
               ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
               ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
               ("devops.kubesphere.io/v1alpha3", "ClusterTemplate"),
               ("devops.kubesphere.io/v1alpha3", "ClusterStepTemplate"),
               ("devops.kubesphere.io/v1alpha1", "S2iBuilderTemplate"))


def devops_objects(installer: Installer) -> set[str]:
    """The module's objects: the common kinds (cluster_objects) and the other kinds it applies."""
    dyn = DynamicClient(installer.api)
    out = set(installer.module_objects().get("devops", {}))
    for api_version, kind in EXTRA_KINDS:
        with contextlib.suppress(ResourceNotFoundError):
            for item in dyn.resources.get(api_version=api_version, kind=kind).get(
                    label_selector=f"{MODULE_LABEL}=devops").items:
                out.add(f"{kind}/{item.metadata.namespace or ''}/{item.metadata.name}")
    return out


def upstream_objects() -> set[str]:
    data = json.loads((REPO / "tests" / "parity" / "upstream" / "devops.json").read_text())
    return {f"{o['kind']}/{o['namespace'] or ''}/{o['name']}" for o in data["objects"]}


def secret_data(api: client.ApiClient, name: str, namespace: str = NS) -> dict[str, str]:
    secret = client.CoreV1Api(api).read_namespaced_secret(name, namespace)
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


def jenkins(api: client.ApiClient) -> client.V1Container:
    return client.AppsV1Api(api).read_namespaced_deployment("devops-jenkins", NS).spec.template.spec.containers[0]


def assert_installed(installer: Installer) -> None:
    api = installer.api
    apps = client.AppsV1Api(api)
    objects = devops_objects(installer)
    assert upstream_objects() <= objects, sorted(upstream_objects() - objects)
    for name, ns in (("devops-apiserver", NS), ("devops-controller", NS), ("devops-jenkins", NS),
                     ("devops-argocd-server", ARGO), ("devops-argocd-repo-server", ARGO)):
        assert apps.read_namespaced_deployment(name, ns).status.available_replicas == 1, name
    for name, ns in (("s2ioperator", NS), ("devops-argocd-application-controller", ARGO)):
        assert apps.read_namespaced_stateful_set(name, ns).status.ready_replicas == 1, name
    cert = secret_data(api, "s2i-webhook-server-cert")
    hooks = client.AdmissionregistrationV1Api(api).read_validating_webhook_configuration(
        "validating-webhook-configuration").webhooks
    assert {base64.b64decode(h.client_config.ca_bundle).decode() for h in hooks} == {cert["caBundle"]}
    config = client.CoreV1Api(api).read_namespaced_config_map("devops-config", NS).data["kubesphere.yaml"]
    config = yaml.safe_load(config)
    assert config["s3"]["endpoint"] == S3["endpoint"] and config["s3"]["accessKeyID"] == "ak"
    assert config["authentication"]["jwtSecret"] == secret_data(api, "kubesphere-secret", "kubesphere-system")["secret"]
    jenkins_secret = secret_data(api, "devops-jenkins")
    assert jenkins_secret["jenkins-admin-user"] == "admin" and len(jenkins_secret["jenkins-admin-password"]) == 22
    ldap = secret_data(api, "openldap-secret", "kubesphere-system")["password"]
    assert jenkins_secret["ldap-manager-password"] == ldap
    assert secret_data(api, "argocd-secret", ARGO)["server.secretkey"]
    status = installer.status()
    assert status["devops"]["status"] == "enabled" and status["devops"]["enabledTime"]


def test_devops_install_change_uninstall_and_reinstall_after_namespace_deleted(devops: Installer) -> None:
    api = devops.api
    devops.apply_cc(devops={"enabled": True}, common__s3=S3)
    ran = devops.reconcile_ok()
    assert "devops" in ran and "openldap" in ran and "minio" not in ran  # the S3 is external
    spans = {m["module"]: m for m in timeline.load(devops.results)["modules"]}
    # Jenkins' LDAP realm reads openldap-secret: openldap first.
    assert dt.datetime.fromisoformat(spans["openldap"]["end"]) <= dt.datetime.fromisoformat(spans["devops"]["start"])
    assert_installed(devops)
    log = (devops.results / "devops" / "stdout").read_text()
    password = secret_data(api, "devops-jenkins")["jenkins-admin-password"]
    assert password not in log and secret_data(api, "argocd-secret", ARGO)["server.secretkey"] not in log
    assert "test-jwt-key" not in log

    # Only devops re-runs (and ks-config, while its inputs name all of devops); the generated password stays.
    devops.apply_cc(devops={"enabled": True, "jenkinsMemoryLim": "6Gi"}, common__s3=S3)
    also = ["ks-config"] if "devops" in get_module("ks-config").inputs else []
    assert devops.reconcile_ok() == sorted(["devops", *also])
    container = jenkins(api)
    assert container.resources.limits["memory"] == "6Gi"
    assert "-XX:MaxRAM=6G " in next(e.value for e in container.env if e.name == "JAVA_TOOL_OPTIONS")
    assert secret_data(api, "devops-jenkins")["jenkins-admin-password"] == password

    devops.apply_cc(devops={"enabled": False, "jenkinsMemoryLim": "6Gi"}, common__s3=S3)
    assert "devops" in devops.reconcile_ok()
    kept = devops_objects(devops)
    assert {k for k in kept if k.split("/")[0] not in ("CustomResourceDefinition", "PersistentVolumeClaim")} == {
        f"Namespace//{NS}", *KEPT_SECRETS}  # the namespace holds the Jenkins volume and its Secret
    assert f"PersistentVolumeClaim/{NS}/devops-jenkins" in kept
    core = client.CoreV1Api(api)
    assert core.read_namespaced_persistent_volume_claim("devops-jenkins", NS).spec.resources.requests["storage"]
    for ns in (WORKER, ARGO):
        with pytest.raises(ApiException):
            core.read_namespace(ns)
    admission = client.AdmissionregistrationV1Api(api)
    assert "validating-webhook-configuration" not in {
        w.metadata.name for w in admission.list_validating_webhook_configuration().items}
    assert "devops" not in devops.status()

    # The user deletes the namespace by hand, as KubeSphere's docs told: enabling devops again installs it anew
    # (a new Jenkins volume and generated password).
    delete_namespace(api, NS)
    devops.apply_cc(devops={"enabled": True, "jenkinsMemoryLim": "6Gi"}, common__s3=S3)
    assert "devops" in devops.reconcile_ok()
    assert_installed(devops)
    assert secret_data(api, "devops-jenkins")["jenkins-admin-password"] != password
