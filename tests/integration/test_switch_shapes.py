"""The takeover over objects shaped as upstream v3.4.1 made them (tests/integration/upstream_v341/, derived from
upstream's templates and charts, applied as it did): a Deployment selector that cannot change (gatekeeper: deleted
orphaning its ReplicaSets and created again, its pods kept), env entries set with ``value:`` where the installer sets
``valueFrom:`` (openldap: the result is the render, not a merge of both), a webhook certificate Secret without
``ca.crt`` (notification-manager: kept as it is, its CA found in the webhook's caBundle) and kubesphere.yaml in the
original's layout (ks-config: nothing rolled)."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_objects import delete_namespace
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from simcluster import SimCluster
from v341_cluster import Builder

from installer.engine.state import StateStore
from installer.objects.certs import generate, required_names
from installer.objects.refs import Obj, ident
from installer.objects.rollout import CONFIG_HASH
from installer.settings import MODULE_LABEL, NAMESPACE

from .conftest import Installer
from .test_adoption import helm_list, secret_value
from .test_openldap import _clean as clean_openldap

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
FIXTURES = Path(__file__).parent / "upstream_v341"
GATEKEEPER = "gatekeeper-system"
MONITORING = "kubesphere-monitoring-system"
NM_CERT = "notification-manager-webhook-server-cert"
NM_WEBHOOK = "notification-manager-validating-webhook"


def upstream(name: str, **values: str) -> list[Obj]:
    """The objects of fixture ``name``, its placeholders replaced."""
    text = (FIXTURES / f"{name}.yaml").read_text()
    for key, value in values.items():
        text = text.replace(key, value)
    return [d for d in yaml.safe_load_all(text) if d]


def rendered(builder: Builder, cc: dict[str, Any], module: str) -> dict[str, Obj]:
    """``Kind/ns/name`` → the module's object as this installer renders it for ``cc``."""
    return {ident(o): o for o in builder.rendered(cc, only=(module,))[module]}


def defaulted(api: client.ApiClient, obj: Obj) -> Obj:
    """``obj`` as the API server stores it (defaults filled): a dry-run create under another name."""
    body = copy.deepcopy(obj)
    body["metadata"]["name"] += "-dry-run"
    res = DynamicClient(api).resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    return json.loads(res.create(body=body, namespace=obj["metadata"].get("namespace"), dry_run="All",
                                 serialize=False).data)


def live(api: client.ApiClient, obj: Obj) -> Obj:
    res = DynamicClient(api).resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    return res.get(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")).to_dict()


def replica_sets(api: client.ApiClient, namespace: str, selector: str) -> dict[str, tuple[str, int]]:
    """ReplicaSet name → (the uid of its owner, its replicas)."""
    return {r.metadata.name: ((r.metadata.owner_references or [client.V1OwnerReference(
        api_version="", kind="", name="", uid="")])[0].uid, r.spec.replicas)
        for r in client.AppsV1Api(api).list_namespaced_replica_set(namespace, label_selector=selector).items}


def pods(api: client.ApiClient, namespace: str, selector: str) -> set[str]:
    return {p.metadata.uid for p in client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items
            if not p.metadata.deletion_timestamp}


def wait_for(check: Any, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def available(api: client.ApiClient, namespace: str, name: str) -> bool:
    dep = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    return (dep.status.observed_generation or 0) >= dep.metadata.generation and \
        (dep.status.available_replicas or 0) == dep.spec.replicas == (dep.status.updated_replicas or 0)


@pytest.fixture
def gatekeeper(installer: Installer, tmp_path: Path) -> Iterator[Installer]:
    delete_namespace(installer.api, GATEKEEPER)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    yield installer
    installer.apply_cc()
    installer.reconcile()  # gatekeeper uninstalled (the platform fixture forgets modules, it does not remove them)
    delete_namespace(installer.api, GATEKEEPER)


def test_gatekeeper_selector_with_helms_heritage(gatekeeper: Installer, sim_cluster: SimCluster,
                                                 tmp_path: Path) -> None:
    """Upstream's gatekeeper Deployments select ``heritage: Helm`` too; their selector cannot change: plan --objects
    says they are recreated, the run deletes each orphaning its ReplicaSet and creates it as rendered, which adopts
    that ReplicaSet (the same pod template): no pod restarts, the module is Installed and names them."""
    installer, api = gatekeeper, gatekeeper.api
    builder = Builder(installer, sim_cluster, tmp_path / "v341")
    ours = rendered(builder, installer.apply_cc(gatekeeper={"enabled": True}), "gatekeeper")
    audit = ours["Deployment/gatekeeper-system/gatekeeper-audit"]
    objects = upstream("gatekeeper", IMAGE=audit["spec"]["template"]["spec"]["containers"][0]["image"])
    builder.kubectl("create", "namespace", GATEKEEPER)
    builder.helm_install("gatekeeper", GATEKEEPER, objects)
    names = ("gatekeeper-audit", "gatekeeper-controller-manager")
    for name in names:
        wait_for(lambda n=name: available(api, GATEKEEPER, n), what=name)
    selector = "gatekeeper.sh/system=yes"
    before_pods, before_sets = pods(api, GATEKEEPER, selector), replica_sets(api, GATEKEEPER, selector)
    uids = {n: client.AppsV1Api(api).read_namespaced_deployment(n, GATEKEEPER).metadata.uid for n in names}

    proc = installer.cli("plan", "--objects", "-o", "json")
    plan = {o["object"]: o for m in json.loads(proc.stdout)["modules"] for o in m["objects"]}
    for name in names:
        shown = plan[f"Deployment/{GATEKEEPER}/{name}"]
        assert shown["action"] == "recreate", shown
        assert "spec.selector cannot change: deleted and created again by the run; its pods are left to the new " \
               "one" in shown["note"], shown

    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "gatekeeper" in installer.ran(proc)
    module = installer.status()["modules"]["gatekeeper"]
    assert module["phase"] == "Installed", module
    for name in names:
        line = (f"Deployment/{GATEKEEPER}/{name}: deleted and created again (spec.selector cannot change; its pods "
                "were left to the new one)")
        assert line in module["immutable"], module
        assert f"[gatekeeper] {line}" in proc.stderr
        dep = client.AppsV1Api(api).read_namespaced_deployment(name, GATEKEEPER)
        assert dep.metadata.uid != uids[name]
        assert dep.spec.selector.match_labels == ours[f"Deployment/{GATEKEEPER}/{name}"]["spec"]["selector"][
            "matchLabels"]
        assert "heritage" not in dep.spec.selector.match_labels
        assert live(api, ours[f"Deployment/{GATEKEEPER}/{name}"])["spec"]["template"] == \
            defaulted(api, ours[f"Deployment/{GATEKEEPER}/{name}"])["spec"]["template"]
    # The new Deployments adopted the old ReplicaSets (their pod template is the render's): no new one, no new pod.
    after_sets = replica_sets(api, GATEKEEPER, selector)
    assert set(after_sets) == set(before_sets), (before_sets, after_sets)
    owners = {client.AppsV1Api(api).read_namespaced_deployment(n, GATEKEEPER).metadata.uid for n in names}
    assert {owner for owner, _ in after_sets.values()} == owners
    assert pods(api, GATEKEEPER, selector) == before_pods
    assert "gatekeeper" not in helm_list(sim_cluster, tmp_path / "helm")


@pytest.fixture
def openldap(installer: Installer) -> Iterator[Installer]:
    clean_openldap(installer.api)
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    yield installer
    installer.apply_cc()
    installer.reconcile()
    clean_openldap(installer.api)


def test_openldap_env_values_become_the_renders(openldap: Installer, sim_cluster: SimCluster, tmp_path: Path) -> None:
    """Upstream's chart set the directory passwords with ``value:``, the installer with ``valueFrom:`` (its
    Secret): a server-side apply alone would merge both into one invalid entry. The takeover makes the StatefulSet's
    pod template exactly the render; the StatefulSet and its volume stay, the directory's password is kept."""
    installer, api = openldap, openldap.api
    builder = Builder(installer, sim_cluster, tmp_path / "v341")
    ours = rendered(builder, installer.apply_cc(common__openldap={"enabled": True}), "openldap")
    sts = ours["StatefulSet/kubesphere-system/openldap"]
    builder.helm_install("ks-openldap", NAMESPACE, upstream(
        "openldap", IMAGE=sts["spec"]["template"]["spec"]["containers"][0]["image"]))
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    wait_for(lambda: (apps.read_namespaced_stateful_set("openldap", NAMESPACE).status.ready_replicas or 0) == 1,
             what="openldap ready")
    uid = apps.read_namespaced_stateful_set("openldap", NAMESPACE).metadata.uid
    claim = core.read_namespaced_persistent_volume_claim("openldap-pvc-openldap-0", NAMESPACE).metadata.uid

    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "openldap" in installer.ran(proc)
    assert installer.status()["modules"]["openldap"]["phase"] == "Installed"
    after = apps.read_namespaced_stateful_set("openldap", NAMESPACE)
    assert after.metadata.uid == uid and not installer.status()["modules"]["openldap"].get("immutable")
    env = {e.name: e for e in after.spec.template.spec.containers[0].env}
    for name in ("LDAP_CONFIG_PASSWORD", "LDAP_ADMIN_PASSWORD"):
        assert env[name].value is None and env[name].value_from.secret_key_ref.name == "openldap-secret"
    assert live(api, sts)["spec"]["template"] == defaulted(api, sts)["spec"]["template"]
    assert core.read_namespaced_persistent_volume_claim("openldap-pvc-openldap-0", NAMESPACE).metadata.uid == claim
    assert secret_value(api, NAMESPACE, "openldap-secret", "password") == "admin"  # what the directory was made with
    assert "ks-openldap" not in helm_list(sim_cluster, tmp_path / "helm")


@pytest.fixture
def monitoring(installer: Installer) -> Iterator[Installer]:
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    yield installer
    # The next test's platform gets a certificate of the installer's again (a fresh install of the module).
    with contextlib.suppress(ApiException):
        client.CoreV1Api(installer.api).delete_namespaced_secret(NM_CERT, MONITORING)
    StateStore(installer.api).forget("monitoring")


def test_webhook_certificate_without_ca_is_kept(monitoring: Installer, sim_cluster: SimCluster,
                                                tmp_path: Path) -> None:
    """notification-manager's chart kept only tls.crt and tls.key in its Secret and the CA in the webhook's
    caBundle: the takeover keeps the Secret as it is (no new CA), the webhooks get that CA, and the API server's
    calls to the webhook (TLS, answered by the simulated pods with that Secret's key pair) still succeed."""
    installer, api = monitoring, monitoring.api
    core = client.CoreV1Api(api)
    made = generate(required_names("notification-manager-webhook", MONITORING), ca_name="webhook-ca",
                    cert_name="notification-manager-webhook")
    secret = upstream("notification-manager", TLS_CRT=base64.b64encode(made["tls.crt"]).decode(),
                      TLS_KEY=base64.b64encode(made["tls.key"]).decode())
    core.delete_namespaced_secret(NM_CERT, MONITORING)
    Builder(installer, sim_cluster, tmp_path / "v341").helm_install("notification-manager", MONITORING, secret)
    ca = base64.b64encode(made["ca.crt"]).decode()
    admission = client.AdmissionregistrationV1Api(api)
    webhook = admission.read_validating_webhook_configuration(NM_WEBHOOK)
    admission.patch_validating_webhook_configuration(NM_WEBHOOK, [
        {"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": ca}
        for i in range(len(webhook.webhooks))])
    StateStore(api).forget("monitoring")  # the module's first install over what the original made

    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "monitoring" in installer.ran(proc)
    assert installer.status()["modules"]["monitoring"]["phase"] == "Installed"
    stored = core.read_namespaced_secret(NM_CERT, MONITORING)
    assert stored.data == secret[0]["data"] and stored.metadata.labels[MODULE_LABEL] == "monitoring"
    assert {w.client_config.ca_bundle for w in admission.read_validating_webhook_configuration(
        NM_WEBHOOK).webhooks} == {ca}
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition("configs.notification.kubesphere.io")
    assert crd.spec.conversion.webhook.client_config.ca_bundle == ca
    assert ("[monitoring] kept the credentials that were there: Secret/kubesphere-monitoring-system/"
            f"{NM_CERT} (keys tls.crt, tls.key)") in proc.stderr
    assert "replaced credentials" not in proc.stderr
    # The API server calls the webhook over TLS with that caBundle: a Config is validated and stored.
    custom = client.CustomObjectsApi(api)
    config = {"apiVersion": "notification.kubesphere.io/v2beta2", "kind": "Config",
              "metadata": {"name": "switch-check"}, "spec": {"email": {"from": "a@example.com"}}}
    custom.create_cluster_custom_object("notification.kubesphere.io", "v2beta2", "configs", config)
    custom.delete_cluster_custom_object("notification.kubesphere.io", "v2beta2", "configs", "switch-check")


@pytest.fixture
def config_readers(installer: Installer) -> Iterator[Installer]:
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    apps = client.AppsV1Api(installer.api)
    stamps = {n: (apps.read_namespaced_deployment(n, NAMESPACE).spec.template.metadata.annotations or {}).get(
        CONFIG_HASH) for n in READERS}
    yield installer
    for name, stamp in stamps.items():  # as the platform had them
        apps.patch_namespaced_deployment(name, NAMESPACE, {"spec": {"template": {"metadata": {"annotations": {
            CONFIG_HASH: stamp}}}}})


READERS = ("ks-apiserver", "ks-controller-manager")


def test_kubesphere_yaml_in_the_originals_layout_rolls_nothing(config_readers: Installer) -> None:
    """The original's kubesphere.yaml holds the same configuration in another layout, and its Deployments carry no
    config-hash: ks-config compares the parsed configuration, so its first install rolls nothing."""
    installer, api = config_readers, config_readers.api
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    text = core.read_namespaced_config_map("kubesphere-config", NAMESPACE).data["kubesphere.yaml"]
    theirs = yaml.safe_dump(yaml.safe_load(text), indent=4, sort_keys=True, default_flow_style=False, width=60)
    assert theirs != text
    core.patch_namespaced_config_map("kubesphere-config", NAMESPACE, {"data": {"kubesphere.yaml": theirs}})
    for name in READERS:
        apps.patch_namespaced_deployment(name, NAMESPACE, [
            {"op": "remove", "path": f"/spec/template/metadata/annotations/{CONFIG_HASH.replace('/', '~1')}"}])
    for name in READERS:
        wait_for(lambda n=name: available(api, NAMESPACE, n), what=name)
    templates = {n: apps.read_namespaced_deployment(n, NAMESPACE).spec.template for n in READERS}
    StateStore(api).forget("ks-config")

    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ks-config" in installer.ran(proc)
    assert {n: apps.read_namespaced_deployment(n, NAMESPACE).spec.template for n in READERS} == templates
    assert yaml.safe_load(core.read_namespaced_config_map("kubesphere-config", NAMESPACE).data[
        "kubesphere.yaml"]) == yaml.safe_load(text)
