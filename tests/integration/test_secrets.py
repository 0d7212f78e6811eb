"""Secrets never leave Secrets: canaries in every credential the installer handles, then a look at everything
it writes outside the cluster's Secrets (logs, results, run dirs, status, state mirror, plan and state output, every
ConfigMap)."""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_objects import eventually
from engine_zygote import ENGINE
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import NAMESPACE

from .conftest import Installer, kill_tree
from .test_engine_recovery import SLOW, playbooks_with, start_until

pytestmark = pytest.mark.cluster
CANARIES = {
    "jwtSecret": "canaryJwtKey0123456789abcdefABCDEF",
    "adminPassword": "Canary-Admin-Passw0rd",
    "clientSecret": "canary-oauth-client-secret",
    "clientSecret2": "canary-oauth-client-secret-two",
    "privateKey": "canary-free-form-private-key",  # a key no suffix rule knows: redacted as oauthOptions is
    "privateKey2": "canary-free-form-private-key-two",
    "etcdKey": "canary-etcd-client-private-key",
}


def _auth(client_secret: str, private_key: str = CANARIES["privateKey"]) -> dict:
    return {"jwtSecret": CANARIES["jwtSecret"], "adminPassword": CANARIES["adminPassword"],
            "oauthOptions": {"identityProviders": [{"name": "github", "type": "GitHubIdentityProvider",
                                                    "mappingMethod": "auto",
                                                    "provider": {"clientID": "id", "clientSecret": client_secret,
                                                                 "privateKey": private_key}}]}}


def _etcd_secret(api: client.ApiClient) -> bool:
    """The etcd client certificates' Secret; True when its namespace had to be made for it (the test's, then)."""
    core = client.CoreV1Api(api)
    body = client.V1Secret(metadata=client.V1ObjectMeta(name="kube-etcd-client-certs"), string_data={
        "etcd-client-ca.crt": "ca", "etcd-client.crt": "crt", "etcd-client.key": CANARIES["etcdKey"]})
    try:
        core.create_namespaced_secret("kubesphere-monitoring-system", body)
    except ApiException as exc:
        if exc.status == 404:  # the namespace comes with preinstall
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="kubesphere-monitoring-system")))
            core.create_namespaced_secret("kubesphere-monitoring-system", body)
            return True
        if exc.status != 409:
            raise
    return False


def _texts(root: Path) -> dict[str, str]:
    out = {}
    for f in root.rglob("*"):
        if f.is_file() and f.name != "kubesphere_running":  # the welcome text: no user-set password in it
            out[str(f)] = f.read_bytes().decode(errors="replace")
    return out


@pytest.fixture
def etcd_secret(installer: Installer) -> Iterator[None]:
    made_namespace = _etcd_secret(installer.api)
    yield
    core = client.CoreV1Api(installer.api)
    core.delete_namespaced_secret("kube-etcd-client-certs", "kubesphere-monitoring-system")
    if made_namespace:  # not the installer's: a later install would neither own nor label it
        core.delete_namespace("kubesphere-monitoring-system")
        eventually(lambda: "kubesphere-monitoring-system" not in {
            n.metadata.name for n in core.list_namespace().items}, what="the test's namespace gone")
    # MinIO's keys and volume, which its uninstall keeps; its pod first: while one mounts the volume, the claim
    # stays Terminating and a later MinIO install would wait for it in vain.
    with contextlib.suppress(ApiException):
        client.AppsV1Api(installer.api).delete_namespaced_deployment("minio", NAMESPACE)
    eventually(lambda: not core.list_namespaced_pod(NAMESPACE, label_selector="app=minio").items,
               what="MinIO's pods gone")
    for delete in (core.delete_namespaced_secret, core.delete_namespaced_persistent_volume_claim):
        with contextlib.suppress(ApiException):
            delete("minio", NAMESPACE)


@pytest.mark.usefixtures("etcd_secret")
def test_no_credential_reaches_logs_results_status_or_run_dirs(installer: Installer, tmp_path: Path) -> None:
    etcd = {"monitoring": True, "tlsEnable": True, "endpointIps": "172.31.0.2"}
    store = {"store": {"enabled": True}}  # MinIO: generated keys
    installer.apply_cc(authentication=_auth(CANARIES["clientSecret"]), etcd=etcd, openpitrix=store)
    logs = [installer.reconcile()]
    installer.apply_cc(authentication=_auth(CANARIES["clientSecret2"], CANARIES["privateKey2"]), etcd=etcd,
                       openpitrix=store)  # diff lines
    logs.append(installer.reconcile())
    assert all(p.returncode == 0 for p in logs), logs[-1].stderr[-3000:]
    assert "clientSecret: <redacted> -> <redacted>" in logs[-1].stderr
    assert "privateKey: <redacted> -> <redacted>" in logs[-1].stderr

    # a run killed mid-playbook leaves its private data dir (the spec as extra-vars) until the next start
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_with(tmp_path, "network", SLOW))
    installer.apply_cc(authentication=_auth(CANARIES["clientSecret2"], CANARIES["privateKey2"]), etcd=etcd,
                       openpitrix=store, network={"topology": {"type": "weave-scope"}})
    proc = start_until(installer, "Slow | Wait")
    kill_tree(proc.pid)
    proc.wait()
    del installer.env["KS_PLAYBOOKS_DIR"]
    logs.append(installer.reconcile())

    core = client.CoreV1Api(installer.api)
    generated = [core.read_namespaced_secret("kubesphere-secret", NAMESPACE).data["token"],
                 *core.read_namespaced_secret("minio", NAMESPACE).data.values()]
    secrets = [*CANARIES.values(), *(base64.b64decode(g).decode() for g in generated)]
    show = [subprocess.run([*ENGINE, *args], env=installer.environ(), capture_output=True,
                           text=True, check=True).stdout for args in (["plan"], ["state", "show"])]
    places = {**_texts(installer.results.parent), "cc status": json.dumps(installer.status()),
              **{f"log {i}": p.stderr for i, p in enumerate(logs)}, "plan": show[0], "state show": show[1]}
    assert any("job_events" in name for name in places) and any(name.endswith("/command") for name in places)
    # Every ConfigMap in the cluster, kubesphere-config's kubesphere.yaml among them: it names the variable that holds
    # the admin token. Its exceptions are KubeSphere 3.4's: the JWT key (a host compares its own with a joining
    # member's kubesphere-config) and an identity provider's secrets (oauthOptions is read only from kubesphere.yaml).
    in_config_maps = {f"ConfigMap {c.metadata.namespace}/{c.metadata.name}": json.dumps(c.data or {})
                      for c in core.list_config_map_for_all_namespaces().items}
    kubesphere_yaml = {CANARIES[k] for k in ("jwtSecret", "clientSecret", "clientSecret2", "privateKey", "privateKey2")}
    # ks-devops' devops-config (an earlier devops test on this cluster may have left it) holds the JWT key, the admin
    # token and MinIO's keys as upstream's chart wrote them: ks-devops v3.4.1 reads them from that file only.
    devops_config = {"jwtSecret": CANARIES["jwtSecret"], "token": secrets[len(CANARIES)],
                     **{f"minio {i}": key for i, key in enumerate(secrets[len(CANARIES) + 1:])}}
    devops_map = "ConfigMap kubesphere-devops-system/devops-config"
    without_devops = {k: v for k, v in in_config_maps.items() if k != devops_map}
    for secret in secrets:
        maps = without_devops if secret in devops_config.values() else in_config_maps
        where = places if secret in kubesphere_yaml else {**places, **maps}
        for form in (secret, base64.b64encode(secret.encode()).decode()):
            leaks = [name for name, text in where.items() if form in text]
            assert not leaks, f"a credential ({secret[:6]}...) is in {leaks}"
