"""A simulated cluster as ks-installer v3.4.1 left it, for the takeover test (tests/integration/test_adoption.py).

The objects are those this installer's modules render for the spec (``installer.render``: each module's real
playbook, reading the cluster), written the way the original wrote them, with the real CLIs:

- ``kubectl apply`` (client-side: field manager ``kubectl-client-side-apply``, the last-applied annotation) for
  what the original applied from its templates, and ``kubectl create secret`` for the passwords it generated;
- ``helm install`` (manager ``helm``, label ``app.kubernetes.io/managed-by: Helm``, annotations
  ``meta.helm.sh/release-*``, record ``sh.helm.release.v1.<release>.v1``) for what it installed from charts, under
  its release names: snapshot-controller (kube-system), ks-core and ks-openldap (kubesphere-system),
  notification-manager (kubesphere-monitoring-system). Each release is a throwaway chart that holds the rendered
  objects as a file (so Helm does not template them again).

Plus the original's credentials (a JWT key in ``kubesphere-secret``, a random redis password in
``redis-secret/auth``, its own webhook serving certificates; no Secret for OpenLDAP, whose directory was
initialised with the chart's ``admin``), its cc status (``status.<component>: enabled``, ``enabledTime``), no
``ks-installer-state``; one object it made that no module makes any more, and one Helm release no module knows.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import string
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from simcluster import SimCluster, tool_path

from installer import KS_VERSION, render
from installer.certs import Layout, dns_names, generate
from installer.cluster import cluster_facts
from installer.core_secret import ADMIN_CLAIMS, DEFAULT_PASSWORD, admin_user, jwt_hs256
from installer.engine_settings import Settings
from installer.manifests import Obj, ident
from installer.reconcile import Reconciler
from installer.render_plugins import GENERATED_CA
from installer.settings import NAMESPACE
from installer.version import INSTALLER_VERSION

#: The default cc plus pluggable modules the original installed from a Helm chart (OpenLDAP) or with a generated
#: password (redis).
SPEC_CHANGES = {"common__redis__enabled": True, "common__openldap__enabled": True}
#: What the original's status said of the modules it installed.
STATUS_KEYS = ("core", "redis", "openldap", "monitoring")
MONITORING = "kubesphere-monitoring-system"


def _ks_core_release(module: str, obj: Obj) -> bool:
    meta = obj["metadata"]
    if obj["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ClusterRole",
                       "ClusterRoleBinding"):
        return meta["name"] in RELEASE_CLUSTER_OBJECTS
    return meta.get("namespace") in (NAMESPACE, "kubesphere-controls-system") and obj["kind"] in (
        "Deployment", "Service", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Secret")


#: ks-core's chart held these cluster-scoped objects (its CRDs and IAM templates were applied with kubectl).
RELEASE_CLUSTER_OBJECTS = {
    "system:kubesphere-router-clusterrole", "kubesphere", "system:kubesphere-cluster-admin",
    "system:nginx-ingress-clusterrole-nisa-binding", "cluster.kubesphere.io", "network.kubesphere.io",
    "resourcesquotas.quota.kubesphere.io", "rulegroups.alerting.kubesphere.io",
    "storageclass-accessor.storage.kubesphere.io", "users.iam.kubesphere.io",
}
#: Release → (namespace, module, which of the module's rendered objects the chart held). Custom resources are
#: applied before the releases in any case (the charts' webhooks would check them).
RELEASES = {
    "snapshot-controller": ("kube-system", "preinstall",
                            lambda m, o: o["metadata"]["name"].startswith("snapshot-controller")),
    "ks-core": (NAMESPACE, "ks-core", _ks_core_release),
    "notification-manager": (MONITORING, "monitoring",
                             lambda m, o: o["metadata"]["name"].startswith("notification-manager")
                             or o["metadata"]["name"] == "zh-cn"),
    "ks-openldap": (NAMESPACE, "openldap", lambda m, o: True),
}
BUILTIN_KINDS = {
    "Namespace", "ServiceAccount", "Secret", "ConfigMap", "Service", "PersistentVolumeClaim", "Deployment",
    "StatefulSet", "DaemonSet", "Job", "CronJob", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "PodDisruptionBudget", "APIService",
}
#: What the original made and no module makes now (never adopted, never deleted).
LEFTOVER: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "kubesphere-legacy-settings", "namespace": NAMESPACE},
                 "data": {"made-by": "ks-installer v3.4.1"}}
#: A Helm release no module knows (someone's own chart in a KubeSphere namespace).
UNKNOWN_RELEASE = ("extra-dashboards", MONITORING)
UNKNOWN_OBJECT: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "extra-dashboards", "namespace": MONITORING}, "data": {"a": "b"}}


@dataclass
class V341Cluster:
    """What the fixture made: every object (``Kind/ns/name`` → uid), the workloads, the credentials' values."""

    objects: dict[str, str] = field(default_factory=dict)
    refs: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    """``Kind/ns/name`` → (apiVersion, kind, namespace, name)."""
    adopted: dict[str, list[str]] = field(default_factory=dict)
    """Module → the ``Kind/ns/name`` of the rendered objects it made (what it takes over)."""
    releases: dict[str, str] = field(default_factory=dict)
    """Release → namespace, of the original's releases."""
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    leftover: str = ident(LEFTOVER)
    unknown_release: str = f"{UNKNOWN_RELEASE[1]}/{UNKNOWN_RELEASE[0]}"
    seconds: dict[str, float] = field(default_factory=dict)


def random_letters(length: int) -> str:
    return "".join(secrets.choice(string.ascii_letters) for _ in range(length))


class Builder:
    def __init__(self, installer: Any, sim: SimCluster, work: Path) -> None:
        self.installer, self.sim, self.work = installer, sim, work
        self.api: client.ApiClient = installer.api
        self.dyn = DynamicClient(self.api)
        self.made = V341Cluster()
        self.cache = work / "kube-cache"

    # -- the real CLIs
    def kubectl(self, *args: str, input: str | None = None) -> str:
        proc = subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={self.sim.kubeconfig}",
                               f"--cache-dir={self.cache}", *args], input=input, capture_output=True, text=True,
                              timeout=300, check=False)
        assert proc.returncode == 0, f"kubectl {' '.join(args[:3])}: {proc.stderr[-3000:]}"
        return proc.stdout

    def helm(self, *args: str) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.sim.kubeconfig), "HELM_CACHE_HOME": str(self.work / "helm"),
               "HELM_CONFIG_HOME": str(self.work / "helm"), "HELM_DATA_HOME": str(self.work / "helm")}
        proc = subprocess.run([str(tool_path("helm")), *args], capture_output=True, text=True, timeout=300,
                              env=env, check=False)
        assert proc.returncode == 0, f"helm {' '.join(args[:3])}: {proc.stderr[-3000:]}"
        return proc.stdout

    def apply(self, objects: list[Obj], name: str) -> None:
        if objects:
            path = self.work / f"{name}.yaml"
            path.write_text(yaml.safe_dump_all(objects))
            self.kubectl("apply", "-f", str(path))

    def helm_install(self, release: str, namespace: str, objects: list[Obj]) -> None:
        chart = self.work / "charts" / release
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": release, "version": "0.1.0",
                                                           "appVersion": "v3.4.1"}))
        (chart / "objects.yaml").write_text(yaml.safe_dump_all(objects))
        (chart / "templates" / "objects.yaml").write_text('{{ .Files.Get "objects.yaml" }}\n')
        self.helm("install", release, str(chart), "--namespace", namespace)
        self.made.releases[release] = namespace

    # -- the steps
    def credentials(self) -> dict[str, Obj]:
        """The original's generated Secrets: created with ``kubectl create`` (the two passwords) or held by its
        charts (the webhook certificates, returned for the releases)."""
        key = random_letters(32)
        self.kubectl("-n", NAMESPACE, "create", "secret", "generic", "kubesphere-secret",
                     f"--from-literal=secret={key}", f"--from-literal=token={jwt_hs256(ADMIN_CLAIMS, key)}")
        redis = random_letters(15)
        self.kubectl("-n", NAMESPACE, "create", "secret", "generic", "redis-secret", f"--from-literal=auth={redis}")
        self.made.credentials = {"kubesphere-system/kubesphere-secret": {"secret": key},
                                 "kubesphere-system/redis-secret": {"auth": redis}}
        certs = {}
        monitor = yaml.safe_load((Path(__file__).parents[1] / "roles" / "ks-monitor" / "defaults" / "main.yaml")
                                 .read_text())["ks_monitor_nm_cert"]
        for namespace, service, layout in (
                (NAMESPACE, "ks-controller-manager", Layout()),
                (MONITORING, "notification-manager-webhook",
                 Layout(monitor["secret"], monitor["ca_name"], monitor["cert_name"], tuple(monitor["keys"]),
                        monitor["type"]))):
            data = generate(dns_names(service, namespace), ca_name=layout.ca_name, cert_name=layout.cert_name)
            certs[layout.secret] = {"apiVersion": "v1", "kind": "Secret", "type": layout.type,
                                    "metadata": {"name": layout.secret, "namespace": namespace},
                                    "data": layout.to_secret(data)}
            self.made.credentials[f"{namespace}/{layout.secret}"] = {
                "ca.crt": base64.b64encode(data["ca.crt"]).decode()}
        return certs

    def cc(self) -> dict[str, Any]:
        cc = self.installer.apply_cc(**SPEC_CHANGES)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%Z", time.gmtime())
        status: dict[str, Any] = {key: {"status": "enabled", "enabledTime": stamp} for key in STATUS_KEYS}
        status["core"]["version"] = "v3.4.1"
        status["clusterId"] = "9f1c3a55-v341"
        self.installer.patch_status(status)
        return cc

    def rendered(self, cc: dict[str, Any], only: tuple[str, ...] = ()) -> dict[str, list[Obj]]:
        """Each planned module's objects (``only`` those modules' when given), as its playbook renders them against
        this cluster."""
        with _environ(self.installer.environ()):
            settings = Settings.from_env()
            planned = Reconciler(self.api, settings).plan(cc)
            assert planned.plan is not None and planned.prepared is not None, planned.errors
            steps = [s for s in planned.plan.runnable if not only or s.module in only]
            variables = {**planned.prepared.spec, **cluster_facts(self.api), "ks_version": KS_VERSION,
                         "ks_installer_version": INSTALLER_VERSION, "ks_namespace": NAMESPACE}
            out = render.render_modules([(s.module, s.action.value, s.hash or "") for s in steps], variables,
                                        settings.playbooks_dir, settings.roles_dir)
        for name, run in out.items():
            assert run.failure is None, f"rendering {name}: {run.failure}"
        return {name: run.objects() for name, run in out.items()}

    def build(self) -> V341Cluster:
        begin = time.monotonic()
        cc = self.cc()
        certs = self.credentials()
        rendered = self.rendered(cc)
        self.made.seconds["render"] = time.monotonic() - begin
        ca = {c["metadata"]["namespace"]: c["data"]["ca.crt"] for c in certs.values()}
        first: list[Obj] = []  # namespaces and CRDs
        plain: list[Obj] = []  # kubectl apply
        custom: list[Obj] = []  # custom resources, before the charts' webhooks
        charts: dict[str, list[Obj]] = {r: [] for r in RELEASES}
        for module, objects in rendered.items():
            for obj in objects:
                text = json.dumps(obj)
                if GENERATED_CA in text:  # the CA the original's chart held, in place of the one a render makes
                    namespace = MONITORING if module == "monitoring" else NAMESPACE
                    obj = json.loads(text.replace(GENERATED_CA, ca[namespace]))
                if obj["kind"] != "Namespace":
                    self.made.adopted.setdefault(module, []).append(ident(obj))
                release = next((r for r, (_, m, member) in RELEASES.items() if m == module and member(module, obj)
                                and obj["kind"] not in ("Namespace", "CustomResourceDefinition")), None)
                if obj["kind"] in ("Namespace", "CustomResourceDefinition"):
                    first.append(obj)
                elif obj["kind"] not in BUILTIN_KINDS:
                    custom.append(obj)
                elif release:
                    charts[release].append(obj)
                else:
                    plain.append(obj)
        charts["ks-core"].append(certs["ks-controller-manager-webhook-cert"])
        charts["notification-manager"].append(certs["notification-manager-webhook-server-cert"])
        self.made.adopted["ks-core"].append(ident(certs["ks-controller-manager-webhook-cert"]))
        self.made.adopted["monitoring"].append(ident(certs["notification-manager-webhook-server-cert"]))
        begin = time.monotonic()
        self.apply(first, "first")
        crds = [o["metadata"]["name"] for o in first if o["kind"] == "CustomResourceDefinition"]
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in crds])
        # The admin User the original's chart made (the default password's hash), and the other custom resources;
        # then the charts (their webhooks would check the custom resources). Independent steps run side by side.
        custom.append(admin_user(DEFAULT_PASSWORD, {}))
        with ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(lambda args: self.apply(*args), [([*plain, LEFTOVER], "plain"), (custom, "custom")]))
            installs = [(r, ns, charts[r]) for r, (ns, _, _) in RELEASES.items()]
            list(pool.map(lambda args: self.helm_install(*args), [*installs, (*UNKNOWN_RELEASE, [UNKNOWN_OBJECT])]))
        self.made.seconds["apply"] = time.monotonic() - begin
        for obj in [*first, *plain, *custom, *(o for objs in charts.values() for o in objs), LEFTOVER,
                    UNKNOWN_OBJECT]:
            meta = obj["metadata"]
            self.made.refs[ident(obj)] = (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])
        self.made.refs["Secret/kubesphere-system/kubesphere-secret"] = ("v1", "Secret", NAMESPACE,
                                                                       "kubesphere-secret")
        self.made.refs["Secret/kubesphere-system/redis-secret"] = ("v1", "Secret", NAMESPACE, "redis-secret")
        self.made.adopted["ks-core"].append("Secret/kubesphere-system/kubesphere-secret")
        self.made.adopted["redis"].append("Secret/kubesphere-system/redis-secret")
        self.settle()
        self.made.objects = {key: uid for key, ref in self.made.refs.items() if (uid := self.uid(ref))}
        return self.made

    def uid(self, ref: tuple[str, str, str, str]) -> str | None:
        api_version, kind, namespace, name = ref
        try:
            return self.dyn.resources.get(api_version=api_version, kind=kind).get(
                name=name, namespace=namespace or None).metadata.uid
        except ApiException:
            return None

    def settle(self, timeout: float = 60) -> None:
        """Wait until the controllers caught up (each workload's revision made, OpenLDAP's volume claimed), as on a
        cluster that has run for a while."""
        apps = client.AppsV1Api(self.api)
        core = client.CoreV1Api(self.api)
        deadline = time.monotonic() + timeout
        while True:
            behind = [d.metadata.name for d in apps.list_deployment_for_all_namespaces().items
                      if (d.status.observed_generation or 0) < d.metadata.generation]
            behind += [s.metadata.name for s in apps.list_stateful_set_for_all_namespaces().items
                       if not s.status.current_revision]
            with contextlib.suppress(ApiException):
                core.read_namespaced_persistent_volume_claim("openldap-pvc-openldap-0", NAMESPACE)
                if not behind:
                    return
            assert time.monotonic() < deadline, f"not settled: {behind}"
            time.sleep(0.5)


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def build(installer: Any, sim: SimCluster, work: Path) -> V341Cluster:
    """Make the cluster of ``installer`` (no state, no cc yet) what ks-installer v3.4.1 left."""
    work.mkdir(parents=True, exist_ok=True)
    return Builder(installer, sim, work).build()
