"""preinstall, ks-core and ks-config against the simulated cluster (kwok makes their pods Running and Ready)."""

from __future__ import annotations

import base64
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import bcrypt
import pytest
import yaml
from cluster_objects import sweep_cluster_scoped
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer import KS_VERSION
from installer.config.defaults import apply_defaults
from installer.engine.plan import Action, Step
from installer.engine.runner import PlaybookRunner
from installer.engine.state import StateStore
from installer.engine_settings import Settings
from installer.objects.cluster import cluster_facts
from installer.objects.rollout import CONFIG_HASH
from installer.settings import MODULE_LABEL, NAMESPACE

from .conftest import REPO, Installer

pytestmark = pytest.mark.cluster
WORKLOADS = ("ks-apiserver", "ks-console", "ks-controller-manager")


def uninstall(installer: Installer, module: str) -> None:
    """Run the module's uninstall play, as the engine would: with the module's record when the installer's state
    has one (it deletes what the record names), which it then forgets."""
    base = installer.results.parent / "uninstall"
    settings = dataclasses.replace(Settings.from_env(), base_dir=base, playbooks_dir=None,
                                   roles_dir=REPO / "roles", results_dir=base / "results", max_parallel=1,
                                   module_timeout=600, console_timeout=1)
    variables = {**apply_defaults({}), **cluster_facts(installer.api), "ks_version": KS_VERSION,
                 "ks_namespace": NAMESPACE}
    store = StateStore(installer.api)
    records = store.load()[0]
    record = records.get(module)
    runner = PlaybookRunner(settings, variables, threading.Event(), api=installer.api,
                            inventories=lambda _: record.inventory if record else (),
                            facts=lambda _: record.objects if record else {})
    outcome = runner.run(Step(module, Action.UNINSTALL))
    assert outcome.ok, outcome.message
    if record is not None:
        store.forget(module)


def remove_core(installer: Installer, sweep: bool = True) -> None:
    """Uninstall ks-config and ks-core; with ``sweep``, a test's cleanup then deletes what carries their label and
    no record named (the ``installer`` fixture forgot the state)."""
    for module in ("ks-config", "ks-core"):
        uninstall(installer, module)
    if sweep:
        sweep_cluster_scoped(installer.api, "ks-config", "ks-core")


@pytest.fixture
def core(installer: Installer) -> Iterator[Installer]:
    """The engine on a cluster without ks-core and ks-config (a spec never disables them: their uninstall
    playbooks clean up before and after)."""
    installer.env.update(KS_CONSOLE_TIMEOUT="120")
    remove_core(installer)
    yield installer
    remove_core(installer)


@pytest.fixture
def installed(platform: Installer) -> Installer:
    """The engine over the default platform, ks-core and ks-config installed and recorded (conftest.platform)."""
    platform.env.update(KS_CONSOLE_TIMEOUT="120")
    return platform


def secret_data(installer: Installer) -> dict[str, str]:
    data = client.CoreV1Api(installer.api).read_namespaced_secret("kubesphere-secret", NAMESPACE).data
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def kubesphere_yaml(installer: Installer) -> dict[str, Any]:
    cm = client.CoreV1Api(installer.api).read_namespaced_config_map("kubesphere-config", NAMESPACE)
    return yaml.safe_load(cm.data["kubesphere.yaml"])


def deployment(installer: Installer, name: str) -> client.V1Deployment:
    return client.AppsV1Api(installer.api).read_namespaced_deployment(name, NAMESPACE)


def test_default_install(core: Installer) -> None:
    core.apply_cc()
    assert {"preinstall", "ks-core", "ks-config"} <= set(core.reconcile_ok())
    modules = core.status()["modules"]
    assert all(modules[m]["phase"] == "Installed" for m in ("preinstall", "ks-core", "ks-config"))
    assert core.status()["core"]["status"] == "enabled"
    for name in WORKLOADS:
        dep = deployment(core, name)
        assert dep.status.available_replicas == dep.spec.replicas == 1  # one control-plane node
        assert dep.metadata.labels[MODULE_LABEL] == "ks-core"
    console = client.CoreV1Api(core.api).read_namespaced_service("ks-console", NAMESPACE)
    assert console.spec.type == "NodePort" and console.spec.ports[0].node_port == 30880
    assert client.CoreV1Api(core.api).read_namespace("kubesphere-controls-system")

    secret = secret_data(core)
    assert secret["initAdminPassword"] == "P@88w0rd" and len(secret["secret"]) == 32
    assert secret["token"].count(".") == 2
    user = client.CustomObjectsApi(core.api).get_cluster_custom_object("iam.kubesphere.io", "v1alpha2", "users",
                                                                        "admin")
    assert user["spec"]["email"] == "admin@kubesphere.io"
    assert bcrypt.checkpw(secret["initAdminPassword"].encode(), user["spec"]["password"].encode())  # a hash, not it

    config = kubesphere_yaml(core)
    assert config["authentication"]["jwtSecret"] == secret["secret"]
    assert config["multicluster"] == {"clusterRole": "none"}  # enable only for a host or a member, as upstream
    assert "logging" not in config and "devops" not in config
    for name in ("ks-apiserver", "ks-controller-manager"):
        assert deployment(core, name).spec.template.metadata.annotations[CONFIG_HASH]

    # No secret value reaches the results, the log lines or the status.
    texts = [p.read_text(errors="replace") for p in core.results.rglob("*") if p.is_file()]
    texts.append(str(core.status()))
    for value in (secret["secret"], secret["token"]):
        assert not any(value in text for text in texts)

    assert core.ran(core.reconcile()) == []
    assert secret_data(core) == secret


def test_console_port_change_reruns_only_ks_core(installed: Installer) -> None:
    core = installed
    core.apply_cc()
    core.reconcile_ok()
    secret, template = secret_data(core), deployment(core, "ks-apiserver").spec.template
    core.apply_cc(common__core__console__port=30881)
    assert core.reconcile_ok() == ["ks-core"]
    console = client.CoreV1Api(core.api).read_namespaced_service("ks-console", NAMESPACE)
    assert console.spec.ports[0].node_port == 30881
    assert secret_data(core) == secret  # generated values survive a re-run
    assert deployment(core, "ks-apiserver").spec.template == template  # not rolled; config hash kept


def test_config_change_rolls_the_readers(installed: Installer) -> None:
    core = installed
    core.apply_cc()
    core.reconcile_ok()
    before = {n: deployment(core, n) for n in WORKLOADS}
    core.apply_cc(network__networkpolicy={"enabled": True})
    assert core.reconcile_ok() == ["ks-config"]
    assert kubesphere_yaml(core)["network"]["enableNetworkPolicy"] is True
    for name in ("ks-apiserver", "ks-controller-manager"):
        dep = deployment(core, name)
        assert dep.spec.template.metadata.annotations[CONFIG_HASH] != \
            before[name].spec.template.metadata.annotations[CONFIG_HASH]
        assert dep.status.updated_replicas == dep.status.available_replicas == dep.spec.replicas
    assert deployment(core, "ks-console").metadata.generation == before["ks-console"].metadata.generation


def test_user_jwt_secret_and_admin_password(core: Installer) -> None:
    core.apply_cc(authentication={"jwtSecret": "a-secret-chosen-by-the-user-of-32-chars", "adminPassword": ""})
    core.reconcile_ok()
    secret = secret_data(core)
    assert secret["secret"] == "a-secret-chosen-by-the-user-of-32-chars"
    assert secret["initAdminPassword"] != "P@88w0rd" and len(secret["initAdminPassword"]) == 16
    assert kubesphere_yaml(core)["authentication"]["jwtSecret"] == "a-secret-chosen-by-the-user-of-32-chars"
    assert not any("a-secret-chosen-by-the-user-of-32-chars" in p.read_text(errors="replace")
                   for p in core.results.rglob("*") if p.is_file())
    # Clearing jwtSecret keeps the key (and so every issued token) instead of generating a new one.
    core.apply_cc(authentication={"jwtSecret": "", "adminPassword": ""})
    assert set(core.reconcile_ok()) == {"ks-core", "ks-config"}
    assert secret_data(core) == secret
    # The admin exists: a new adminPassword would change nothing, so nothing runs, and both places say why.
    core.apply_cc(authentication={"jwtSecret": "", "adminPassword": "Later-Passw0rd"})
    proc = core.reconcile()
    assert proc.returncode == 0 and core.ran(proc) == []
    assert "spec.authentication.adminPassword acts only at the first install" in proc.stderr
    assert "acts only at the first install" in core.status()["modules"]["ks-core"]["message"]
    assert "Later-Passw0rd" not in proc.stderr + str(core.status())
    assert secret_data(core) == secret
    console = core.condition("ConsoleReady")  # still true, and observed at the generation just reconciled
    assert console["status"] == "True" and console["observedGeneration"] == core.cc()["metadata"]["generation"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"persistence__storageClass": "missing"},
     "persistence.storageClass is missing, but no StorageClass of that name exists (the cluster has: local)"),
    ({"authentication": {"jwtSecret": "", "adminPassword": "lowercase-only"}},
     "authentication.adminPassword is too weak: it needs an uppercase letter, a digit"),
])
def test_preinstall_checks_block_the_install(installer: Installer, changes: dict[str, Any], message: str) -> None:
    installer.apply_cc(**changes)
    proc = installer.reconcile()
    assert proc.returncode == 1
    status = installer.status()["modules"]
    assert status["preinstall"]["phase"] == "Failed"
    assert status["preinstall"]["message"] == message
    assert status["ks-core"]["phase"] == "Blocked"
    assert "lowercase-only" not in proc.stderr + str(installer.status())


def test_uninstall_keeps_crds_and_kubesphere_system(core: Installer) -> None:
    core.apply_cc()
    core.reconcile_ok()
    remove_core(core)
    v1, apps = client.CoreV1Api(core.api), client.AppsV1Api(core.api)
    assert not v1.list_namespaced_config_map(NAMESPACE, label_selector=f"{MODULE_LABEL} in (ks-core,ks-config)").items
    assert not apps.list_namespaced_deployment(NAMESPACE, label_selector=f"{MODULE_LABEL}=ks-core").items
    with pytest.raises(ApiException) as gone:
        v1.read_namespaced_secret("kubesphere-secret", NAMESPACE)
    assert gone.value.status == 404
    assert v1.read_namespace(NAMESPACE).status.phase == "Active"
    assert not apps.list_namespaced_deployment("kubesphere-controls-system",
                                               label_selector=f"{MODULE_LABEL}=ks-core").items
    crd = client.ApiextensionsV1Api(core.api).read_custom_resource_definition("users.iam.kubesphere.io")
    assert crd.metadata.name
