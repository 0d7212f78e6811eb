"""A simulated cluster as ks-installer v3.4.1 left it: built by the takeover tests (tests/integration/test_adoption*.py)
and by the demo (``hack/demo.py up --from-v341``).

A :class:`Profile` with ``upstream`` (:data:`DEFAULT`) is made of upstream v3.4.1's own objects: the committed render
of tests/parity/upstream-v341/<profile> (``hack/upstream_render.py``: the tag's templates with Ansible's variables,
its charts with ``helm template``), applied step by step as upstream's tasks did (:meth:`Builder.build`):
``kubectl create namespace`` and ``kubectl label``, ``kubectl create`` for the Secrets it made from literals,
``kubectl apply`` (client-side; server-side for the CRDs too long for the last-applied annotation, as its fallback),
``helm install`` under upstream's release names of a chart holding the rendered objects (so Helm does not template
them again), the CRDs and namespaces ``helm install`` created itself (``crds/``, ``--create-namespace``: field
manager ``helm``, outside the release), ``kubectl label namespace``, and the ``kubectl patch`` of a hook that was
deleted on success or of a task's script. The credentials upstream generated (JWT
key and token, redis' password, each chart's CA and serving certificate) are new values filled in at apply time.

:data:`DEFAULT` is the default platform with redis and OpenLDAP; :data:`PLUGGABLE_UPSTREAM`: every pluggable
module (upstream's profile ``pluggable``); :data:`PLUGGABLE_V332`: the same from v3.3.2. Each adds the original's cc
status (``status.<component>: enabled``, ``enabledTime``), no ``ks-installer-state``; objects it made that no module
makes any more (a ConfigMap, a ClusterRole), and one Helm release no module knows. :meth:`Builder.rendered` (a
module's objects as this installer's roles render them against the cluster) and :meth:`Builder.helm_install` serve
tests that write one release of the original's shape."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import upstream_fixture
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from simcluster import tool_path

from installer import yaml_c
from installer.config import apply_defaults
from installer.engine.adoption import RELEASES as ADOPTED_RELEASES
from installer.engine.reconcile import Reconciler
from installer.engine.runner import run_variables
from installer.engine_settings import Settings
from installer.modules import get_module
from installer.objects.cluster import ClusterConfigurations, cluster_facts
from installer.objects.refs import Obj, ident
from installer.preview import render
from installer.settings import CC_GROUP, CC_NAME, CC_PLURAL, CC_VERSION, NAMESPACE

REPO = Path(__file__).resolve().parents[1]
MONITORING = "kubesphere-monitoring-system"
LOGGING = "kubesphere-logging-system"
Ref = tuple[str, str, str, str]
"""(apiVersion, kind, namespace, name); namespace '' when cluster-scoped."""
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")


class Target(Protocol):
    """The cluster the fixture builds, as the engine sees it: its API client, the engine's environment (a render
    runs the modules' playbooks with it), and the cc."""

    api: client.ApiClient

    def environ(self) -> dict[str, str]: ...

    def apply_cc(self, **spec_changes: Any) -> dict[str, Any]: ...

    def patch_status(self, status: dict[str, Any]) -> None: ...


class HasKubeconfig(Protocol):
    kubeconfig: Path


@dataclass
class ClusterTarget:
    """A :class:`Target` for a cluster reached with ``kubeconfig`` (``work``: the render's scratch directory): the cc
    is ``deploy/cluster-configuration.yaml`` with the changes, applied with ``kubectl apply`` as users did."""

    api: client.ApiClient
    kubeconfig: Path
    work: Path

    def environ(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "KS_RESULTS_DIR": str(self.work / "results"),
                "KS_BASE_DIR": str(self.work)}

    def apply_cc(self, **spec_changes: Any) -> dict[str, Any]:
        cc = yaml.safe_load((REPO / "deploy" / "cluster-configuration.yaml").read_text())
        for path, value in spec_changes.items():
            node = cc["spec"]
            *parents, leaf = path.split("__")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
        path = self.work / "cluster-configuration.yaml"
        path.write_text(yaml.safe_dump(cc))
        subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={self.kubeconfig}", "apply", "-f", str(path)],
                       check=True, capture_output=True, timeout=60)
        return client.CustomObjectsApi(self.api).get_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE,
                                                                              CC_PLURAL, CC_NAME)

    def patch_status(self, status: dict[str, Any]) -> None:
        ClusterConfigurations(self.api).patch_status(status)


@dataclass(frozen=True)
class Profile:
    """What the original installed: the cc's spec changes (``a__b=value``, over the default cc); ``upstream``: the
    profile of tests/parity/upstream-<tag> that holds upstream's own render of it."""

    spec: dict[str, Any]
    upstream: str = ""
    tag: str = "v3.4.1"
    """The tag whose render ``upstream`` names (v3.3.2: the cluster upstream's v3.4.1 installer upgraded)."""
    upstream_cc: bool = False
    """The cc is the tag's own ``deploy/cluster-configuration.yaml`` with the changes (the render's manifest), as the
    user applied it and keeps through the switch; else this installer's with the changes."""
    due: tuple[str, ...] = ()
    """The releases whose generated certificate expires within days (upstream_fixture.DUE_VALIDITY), so the switch
    replaces it (:attr:`V341Cluster.renewed`)."""


#: The default cc plus pluggable modules the original installed from a Helm chart (OpenLDAP) or with a generated
#: password (redis): upstream v3.4.1's own objects.
DEFAULT = Profile({"common__redis__enabled": True, "common__openldap__enabled": True}, upstream="default")
#: The workloads whose pods the switch from upstream's own objects restarts, once each, for a reason
#: docs/switching.md lists ("Switching from ks-installer v3.4.1"): OpenLDAP's passwords come from openldap-secret
#: instead of `value:` in the pod spec; ks-apiserver's and ks-controller-manager's credentials (the LDAP manager
#: password v3.4.1 wrote into kubesphere-config, the JWT key, the S3 keys, ...) from Secrets as environment variables.
UPSTREAM_ROLLS = frozenset({"StatefulSet/kubesphere-system/openldap", "Deployment/kubesphere-system/ks-apiserver",
                            "Deployment/kubesphere-system/ks-controller-manager"})
#: Every pluggable module v3.4.1 installs on a simulated cluster, as upstream v3.4.1's own objects (its profile
#: ``pluggable``): the spec changes are paths, so each section keeps the default cc's other keys. The S2I webhook's
#: certificate is due, as upstream's was (ks-devops' chart shipped a fixed chain, whose CA expired on 2024-02-14 and
#: whose key is public; the render puts a new chain in its place, valid for days here): the switch replaces it.
PLUGGABLE_UPSTREAM = Profile({
    **DEFAULT.spec, "common__opensearch__dashboard": {"enabled": True}, "events__enabled": True,
    "auditing__enabled": True, "logging__enabled": True, "devops__enabled": True, "gatekeeper__enabled": True,
    "multicluster__clusterRole": "host", "servicemesh__enabled": True, "edgeruntime__enabled": True,
    "edgeruntime__kubeedge__enabled": True,
}, upstream="pluggable", due=("devops",))
#: Every pluggable module as upstream v3.3.2 itself rendered and applied it (tests/parity/upstream-v332/pluggable,
#: v3.3.2's own cc): its log store is the Elasticsearch v3.3.2 installed (release elasticsearch-logging), which
#: upstream's v3.4.1 installer kept (status.es), so the cc has no OpenSearch dashboard to enable.
PLUGGABLE_V332 = Profile({k: v for k, v in PLUGGABLE_UPSTREAM.spec.items() if not k.startswith("common__opensearch")},
                         upstream="pluggable", tag="v3.3.2", upstream_cc=True, due=("devops",))
#: Upstream's MinIO keys (the chart values of release ks-minio), which ks-apiserver and ks-devops were given.
MINIO_KEYS = {"accesskey": "openpitrixminioaccesskey", "secretkey": "openpitrixminiosecretkey"}
#: What the original made and no module makes now (never adopted, never deleted): a Grafana dashboard upstream's
#: monitoring role creates by its fixed name (installer/data/upstream-objects.json), which no module here makes.
LEFTOVER: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "grafana-dashboard-apiserver", "namespace": MONITORING},
                 "data": {"made-by": "ks-installer v3.4.1"}}
#: A Helm release no module knows (someone's own chart in a KubeSphere namespace): its release record names its
#: objects, so they are listed as the original's, never deleted.
UNKNOWN_RELEASE = ("extra-dashboards", MONITORING)
UNKNOWN_OBJECT: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "extra-dashboards", "namespace": MONITORING}, "data": {"a": "b"}}
UNKNOWN_CLUSTER_OBJECT: Obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                               "metadata": {"name": "extra-dashboards-viewer"},
                               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}
#: A user's own objects, applied with kubectl in KubeSphere's namespace and under a KubeSphere-like name: no record
#: of the original names them, so they are never listed as its leftovers.
USER_OBJECTS: list[Obj] = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team-settings", "namespace": NAMESPACE},
     "data": {"team": "platform"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "kubesphere-team-viewer"},
     "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
]


@dataclass
class V341Cluster:
    """What the fixture made: every object (``Kind/ns/name`` → uid), the workloads, the credentials' values."""

    objects: dict[str, str] = field(default_factory=dict)
    refs: dict[str, Ref] = field(default_factory=dict)
    """``Kind/ns/name`` → (apiVersion, kind, namespace, name)."""
    adopted: dict[str, list[str]] = field(default_factory=dict)
    """Module → the ``Kind/ns/name`` of the rendered objects it made (what it takes over)."""
    releases: dict[str, str] = field(default_factory=dict)
    """``namespace/release`` → module, of the original's releases (the unknown one: '')."""
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    """``namespace/name`` of a Secret → the original's values of some of its keys."""
    renewed: dict[str, str] = field(default_factory=dict)
    """``Secret/ns/name`` of a webhook certificate that is due (:attr:`Profile.due`) → the webhook Service it is
    for: the switch replaces it (not among :attr:`credentials`)."""
    status: dict[str, Any] = field(default_factory=dict)
    """The cc status the original left."""
    leftovers: tuple[str, ...] = (ident(LEFTOVER), ident(UNKNOWN_OBJECT), ident(UNKNOWN_CLUSTER_OBJECT))
    """What the takeover lists as the original's and leaves (status.adoption.unadopted)."""
    others: tuple[str, ...] = tuple(ident(o) for o in USER_OBJECTS)
    """A user's own objects in KubeSphere's namespaces, never listed."""
    unknown_release: str = f"{UNKNOWN_RELEASE[1]}/{UNKNOWN_RELEASE[0]}"
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def leftover(self) -> str:
        return self.leftovers[0]

    @property
    def modules(self) -> set[str]:
        return set(self.adopted)


def upstream_status(spec: dict[str, Any], modules: list[str], version: str = "v3.4.1") -> dict[str, Any]:
    """The cc status the original (``version``) left for ``modules`` (their registry status keys, nested as
    ``events.ruler``)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%Z", time.gmtime())
    status: dict[str, Any] = {}
    for module in modules:
        for key, on in get_module(module).status_keys(spec).items():
            if on:
                node = status
                for part in key.split("."):
                    node = node.setdefault(part, {})
                node.update({"status": "enabled", "enabledTime": stamp})
    status["core"]["version"] = version
    status["clusterId"] = f"9f1c3a55-{version.replace('.', '')}"
    return status


def service_of(certificate: dict[str, Any], namespace: str) -> str:
    """The Service a generated serving certificate is for (the one its ``<service>.<namespace>.svc`` names)."""
    suffix = f".{namespace}.svc"
    return next(n.removesuffix(suffix) for n in certificate["dns"] if n.endswith(suffix))


class Builder:
    """Builds the cluster of ``target`` (no state, no cc yet; ``cluster.kubeconfig`` for the CLIs) in ``work``."""

    def __init__(self, target: Target, cluster: HasKubeconfig, work: Path, profile: Profile = DEFAULT) -> None:
        self.target, self.kubeconfig, self.work, self.profile = target, cluster.kubeconfig, work, profile
        self.api: client.ApiClient = target.api
        self.dyn = dynamic(self.api)
        self.made = V341Cluster()
        self.cache = work / "kube-cache"

    # -- the real CLIs
    def kubectl(self, *args: str, input: str | None = None) -> str:
        proc = subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={self.kubeconfig}",
                               f"--cache-dir={self.cache}", *args], input=input, capture_output=True, text=True,
                              timeout=300, check=False)
        assert proc.returncode == 0, f"kubectl {' '.join(args[:3])}: {proc.stderr[-3000:]}"
        return proc.stdout

    def helm(self, *args: str) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HELM_CACHE_HOME": str(self.work / "helm"),
               "HELM_CONFIG_HOME": str(self.work / "helm"), "HELM_DATA_HOME": str(self.work / "helm")}
        proc = subprocess.run([str(tool_path("helm")), *args], capture_output=True, text=True, timeout=300,
                              env=env, check=False)
        assert proc.returncode == 0, f"helm {' '.join(args[:3])}: {proc.stderr[-3000:]}"
        return proc.stdout

    def apply(self, objects: list[Obj], name: str) -> None:
        if objects:
            path = self.work / f"{name}.yaml"
            path.write_text(yaml_c.dump_all(objects))
            self.kubectl("apply", "-f", str(path))

    def helm_install(self, release: str, namespace: str, objects: list[Obj], module: str = "",
                     chart_name: str = "", chart_version: str = "0.1.0", app_version: str = "v3.4.1") -> None:
        chart = self.work / "charts" / namespace / release
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": chart_name or release,
                                                           "version": chart_version, "appVersion": app_version}))
        (chart / "objects.yaml").write_text(yaml_c.dump_all(objects))
        (chart / "templates" / "objects.yaml").write_text('{{ .Files.Get "objects.yaml" }}\n')
        self.helm("install", release, str(chart), "--namespace", namespace)
        # A release no module takes over (v3.3.2's Elasticsearch, which v3.4.1 left as it was) stays: module ''.
        self.made.releases[f"{namespace}/{release}"] = module if (namespace, release) in ADOPTED_RELEASES else ""

    # -- the steps
    def cc(self, fixture: upstream_fixture.Fixture | None = None) -> dict[str, Any]:
        """Apply the cc (``kubectl apply``, as users did, for the tag's own) and return it."""
        if fixture is None or not self.profile.upstream_cc:
            return self.target.apply_cc(**self.profile.spec)
        cc = fixture.manifest["cc"]
        path = self.work / "cluster-configuration.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": f"{CC_GROUP}/{CC_VERSION}", "kind": "ClusterConfiguration",
                                        "metadata": {"name": CC_NAME, "namespace": NAMESPACE,
                                                     "labels": cc["labels"]}, "spec": cc["spec"]}))
        self.kubectl("apply", "-f", str(path))
        return client.CustomObjectsApi(self.api).get_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE,
                                                                              CC_PLURAL, CC_NAME)

    def render(self, cc: dict[str, Any], only: tuple[str, ...] = ()) -> tuple[dict[str, render.Rendered],
                                                                               dict[str, Any]]:
        """Each planned module's render (``only`` those modules' when given) against this cluster, and the spec
        with the defaults."""
        with _environ(self.target.environ()):
            settings = Settings.from_env()
            planned = Reconciler(self.api, settings).plan(cc)
            assert planned.plan is not None and planned.prepared is not None, planned.errors
            steps = [s for s in planned.plan.runnable if not only or s.module in only]
            variables = run_variables(planned.prepared.spec, cluster_facts(self.api))
            out = render.render_modules([(s.module, s.action.value, s.hash or "") for s in steps], variables,
                                        settings.roles_dir, plays_dir=settings.playbooks_dir)
        for name, run in out.items():
            assert run.failure is None, f"rendering {name}: {run.failure}"
        return out, planned.prepared.spec

    def rendered(self, cc: dict[str, Any], only: tuple[str, ...] = ()) -> dict[str, list[Obj]]:
        """Each planned module's objects (``only`` those modules' when given), as its playbook renders them against
        this cluster."""
        return {name: run.objects() for name, run in self.render(cc, only)[0].items()}

    def build(self) -> V341Cluster:
        """The cluster from upstream's own render (tests/parity/upstream-v341), applied step by step as upstream's
        tasks did (:data:`upstream_fixture.HOW`), with new generated credentials."""
        begin = time.monotonic()
        # As upstream made it at this cluster's Kubernetes version (the committed render is at the pinned one).
        fixture = upstream_fixture.at_version(upstream_fixture.load(self.profile.upstream, self.profile.tag),
                                              client.VersionApi(self.api).get_code().git_version, self.profile.tag)
        assert fixture.spec_changes == self.profile.spec, "the profile's spec is not the fixture's"
        cc = self.cc(fixture)
        creds = upstream_fixture.Credentials(fixture, self.profile.due)
        due = {f"<generated:{release}/tls.crt>" for release in self.profile.due}
        self.made.seconds["load"] = time.monotonic() - begin
        begin = time.monotonic()
        status = upstream_status(apply_defaults(json.loads(json.dumps(cc["spec"]))), list(fixture.modules),
                                 self.profile.tag)
        if any(s.release == "elasticsearch-logging" for s in fixture.modules.get("opensearch", [])):
            status["es"] = status.pop("opensearch")  # v3.3.2's es-install.yaml: status.es, its only log store
        self.target.patch_status(status)
        self.made.status = status
        for module, steps in fixture.modules.items():
            for step in steps:
                objects = [creds.fill(o) for o in step.objects]
                self.upstream_step(module, step, objects, creds)
                for original, obj, key in zip(step.objects, objects, step.idents, strict=True):
                    kind, *rest = key.split("/")
                    self.made.refs[key] = (obj["apiVersion"], kind, rest[0] if len(rest) == 2 else "", rest[-1])
                    if kind != "Namespace" and key not in self.made.adopted.get(module, []):
                        self.made.adopted.setdefault(module, []).append(key)
                    if kind == "Secret" and due & set((original.get("data") or {}).values()):
                        self.made.renewed[key] = service_of(step.certificate, rest[0])
                    elif values := creds.secret_values(original):
                        self.made.credentials[f"{rest[0]}/{rest[-1]}"] = values
        self.apply([LEFTOVER, *USER_OBJECTS], "leftovers")
        self.helm_install(*UNKNOWN_RELEASE, [UNKNOWN_OBJECT, UNKNOWN_CLUSTER_OBJECT], "")
        for obj in (LEFTOVER, UNKNOWN_OBJECT, UNKNOWN_CLUSTER_OBJECT, *USER_OBJECTS):
            meta = obj["metadata"]
            self.made.refs[ident(obj)] = (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])
        self.made.seconds["apply"] = time.monotonic() - begin
        self.settle()
        self.made.objects = uids(self.api, self.made.refs)
        return self.made

    def upstream_step(self, module: str, step: upstream_fixture.Step, objects: list[Obj],
                      creds: upstream_fixture.Credentials) -> None:
        """Apply one of upstream's steps as its task did."""
        if step.how == "kubectl-create-namespace":
            names = [o["metadata"]["name"] for o in objects]
            for name in names:
                self.kubectl_rc("create", "namespace", name)  # 'already exists' is fine, as upstream's task
            self.kubectl("label", "ns", "default", "kube-public", "kube-system", *names,
                         "kubesphere.io/workspace=system-workspace", "--overwrite")
            for name in self.kubectl("get", "ns", "-o", "jsonpath={.items[*].metadata.name}").split():
                self.kubectl("label", "ns", name, f"kubesphere.io/namespace={name}", "--overwrite")
        elif step.how == "kubectl-create-secret":
            for obj in objects:
                self.kubectl("create", "-f", "-", input=json.dumps(obj))
        elif step.how == "kubectl-apply":
            # The last-applied annotation holds the whole object: too long for the biggest CRDs, which upstream's
            # task then applied server-side (--force-conflicts).
            big = [o for o in objects if len(json.dumps(o)) > 250_000]
            small = [o for o in objects if o not in big]
            namespace = ("-n", step.namespace) if step.namespace else ()
            if small:
                path = self.work / f"{module}-{len(list(self.work.glob(f'{module}-*.yaml')))}.yaml"
                path.write_text(yaml_c.dump_all(small))
                self.kubectl("apply", *namespace, "-f", str(path))
            if big:
                path = self.work / f"{module}-server-side.yaml"
                path.write_text(yaml_c.dump_all(big))
                self.kubectl("apply", "--server-side", "--force-conflicts", *namespace, "-f", str(path))
            self.established([o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"])
        elif step.how == "helm-crds":
            # Helm creates a chart's crds/ that do not exist yet (and leaves those that do).
            path = self.work / f"{module}-crds-{len(list(self.work.glob(f'{module}-crds-*.yaml')))}.yaml"
            path.write_text(yaml_c.dump_all(objects))
            self.kubectl_rc("create", "--field-manager=helm", "-f", str(path))
            self.established([o["metadata"]["name"] for o in objects])
        elif step.how == "helm-create-namespace":
            for obj in objects:
                self.kubectl_rc("create", "namespace", obj["metadata"]["name"], "--field-manager=helm")
        elif step.how == "kubectl-label-namespace":
            for obj in objects:
                labels = [f"{k}={v}" for k, v in obj["metadata"]["labels"].items()]
                self.kubectl("label", "namespace", obj["metadata"]["name"], *labels, "--overwrite")
        elif step.how == "helm":
            self.helm_install(step.release, step.namespace, objects, module, step.chart, step.chart_version,
                              self.profile.tag)
        elif step.how == "kubectl-patch":
            for patch in step.patches:
                body = creds.fill(patch)
                self.kubectl("patch", body["kind"].lower(), body["metadata"]["name"], "--type=merge", "-p",
                             json.dumps({k: v for k, v in body.items() if k not in ("apiVersion", "kind",
                                                                                     "metadata")}))
        else:
            raise AssertionError(f"{module}: unknown step {step.how}")

    def established(self, crds: list[str], timeout: float = 60) -> None:
        """Wait until the CRDs are served (``kubectl wait`` fails on a CRD whose status has no conditions yet)."""
        ext = client.ApiextensionsV1Api(self.api)
        deadline = time.monotonic() + timeout

        def conditions(name: str) -> list[dict[str, Any]]:
            # The raw JSON: a big CRD's schema made into the client's models cost more than the request.
            raw = ext.read_custom_resource_definition(name, _preload_content=False).data
            return (json.loads(raw).get("status") or {}).get("conditions") or []
        for name in crds:
            while not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions(name)):
                assert time.monotonic() < deadline, f"CRD {name} not established"
                time.sleep(0.2)

    def kubectl_rc(self, *args: str) -> int:
        return subprocess.run([str(tool_path("kubectl")), f"--kubeconfig={self.kubeconfig}",
                               f"--cache-dir={self.cache}", *args], capture_output=True, timeout=120,
                              check=False).returncode

    def settle(self, timeout: float = 120) -> None:
        """Wait until the controllers caught up (each workload's revision made, the StatefulSets' volumes claimed,
        each ResourceQuota counted: its hard limits in its status and the pods of its namespace's ReplicaSets made,
        which its usage counts), as on a cluster that has run for a while: none of them writes an object later."""
        apps = client.AppsV1Api(self.api)
        core = client.CoreV1Api(self.api)
        deadline = time.monotonic() + timeout
        while True:
            behind = [d.metadata.name for d in apps.list_deployment_for_all_namespaces().items
                      if (d.status.observed_generation or 0) < d.metadata.generation]
            behind += [d.metadata.name for d in apps.list_daemon_set_for_all_namespaces().items
                       if (d.status.observed_generation or 0) < d.metadata.generation]
            claims = {(c.metadata.namespace, c.metadata.name)
                      for c in core.list_persistent_volume_claim_for_all_namespaces().items}
            for sts in apps.list_stateful_set_for_all_namespaces().items:
                meta, spec = sts.metadata, sts.spec
                wanted = {(meta.namespace, f"{t.metadata.name}-{meta.name}-0")
                          for t in spec.volume_claim_templates or []} if spec.replicas else set()
                if not sts.status.current_revision or not wanted <= claims:
                    behind.append(meta.name)
            quotas = core.list_resource_quota_for_all_namespaces().items
            behind += [q.metadata.name for q in quotas if (q.status.hard or {}) != (q.spec.hard or {})]
            counted = {q.metadata.namespace for q in quotas}
            behind += [r.metadata.name for r in apps.list_replica_set_for_all_namespaces().items
                       if r.metadata.namespace in counted and (r.status.replicas or 0) != (r.spec.replicas or 0)]
            if not behind:
                return
            assert time.monotonic() < deadline, f"not settled: {behind}"
            time.sleep(0.5)


_DYNAMIC: weakref.WeakKeyDictionary[client.ApiClient, DynamicClient] = weakref.WeakKeyDictionary()


def dynamic(api: client.ApiClient) -> DynamicClient:
    """One DynamicClient per API client: making one reads the discovery cache file and asks the server's version,
    which per object read cost more than the read (a kind it has not seen yet is discovered again on demand)."""
    if api not in _DYNAMIC:
        _DYNAMIC[api] = DynamicClient(api)
    return _DYNAMIC[api]


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def build(target: Target, cluster: HasKubeconfig, work: Path, profile: Profile = DEFAULT) -> V341Cluster:
    """Make the cluster of ``target`` (no state, no cc yet) what ks-installer v3.4.1 left for ``profile``."""
    work.mkdir(parents=True, exist_ok=True)
    return Builder(target, cluster, work, profile).build()


# -- what the takeover changed (the tests and the demo compare before and after)
def snapshot(api: client.ApiClient, refs: dict[str, Ref]) -> dict[str, Obj]:
    """Each ref's live object as the API serves it (none for one that is gone), read with one list per kind: hundreds
    of reads one by one cost the API server and the client's models far more. Every object has its apiVersion and
    kind (a list's items may not)."""
    wanted: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
    for key, (api_version, kind, namespace, name) in refs.items():
        wanted.setdefault((api_version, kind), {})[(namespace, name)] = key
    dyn = dynamic(api)
    out: dict[str, Obj] = {}
    for (api_version, kind), keys in wanted.items():
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        raw = api.call_api(resource.path(), "GET", header_params={"Accept": "application/json"},
                           auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True).data
        for item in json.loads(raw)["items"]:
            meta = item["metadata"]
            if (key := keys.get((meta.get("namespace") or "", meta["name"]))) is not None:
                out[key] = {"apiVersion": api_version, "kind": kind, **item}
    return out


def uids(api: client.ApiClient, refs: dict[str, Ref]) -> dict[str, str]:
    """Each ref's live uid (none for one that is gone), in the order of ``refs``."""
    objects = snapshot(api, refs)
    return {key: objects[key]["metadata"]["uid"] for key in refs if key in objects}


def live(api: client.ApiClient, ref: Ref) -> Any:
    api_version, kind, namespace, name = ref
    return dynamic(api).resources.get(api_version=api_version, kind=kind).get(
        name=name, namespace=namespace or None)


def uid_of(api: client.ApiClient, ref: Ref) -> str | None:
    try:
        return live(api, ref).metadata.uid
    except ApiException:
        return None


def deleted(api: client.ApiClient, made: V341Cluster) -> list[str]:
    """What the fixture made that is gone or another object now (its uid changed)."""
    now = uids(api, {k: made.refs[k] for k in made.objects})
    return sorted(k for k, uid in made.objects.items() if now.get(k) != uid)


def revisions(api: client.ApiClient, made: V341Cluster) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Each workload's generation and the names of its ReplicaSets / ControllerRevisions (a rollout adds one)."""
    apps = client.AppsV1Api(api)
    children: dict[tuple[str, str], list[Any]] = {}
    out = {}
    workloads = {key: ref for key, ref in made.refs.items() if ref[1] in WORKLOADS}
    objects = snapshot(api, workloads)
    for key, ref in workloads.items():
        meta = objects[key]["metadata"]
        kind = "ReplicaSet" if ref[1] == "Deployment" else "ControllerRevision"
        if (kind, ref[2]) not in children:
            children[(kind, ref[2])] = (apps.list_namespaced_replica_set(ref[2]).items if kind == "ReplicaSet"
                                        else apps.list_namespaced_controller_revision(ref[2]).items)
        names = tuple(sorted(c.metadata.name for c in children[(kind, ref[2])]
                             if any(o.uid == meta["uid"] for o in c.metadata.owner_references or [])))
        out[key] = (meta["generation"], names)
    return out


def restarted(before: dict[str, tuple[int, tuple[str, ...]]],
              after: dict[str, tuple[int, tuple[str, ...]]]) -> list[str]:
    """The workloads rolled out between two :func:`revisions`: a rollout makes a ReplicaSet (ControllerRevision);
    a StatefulSet's or DaemonSet's generation moves only with its spec. A Deployment's also moves with its
    annotations (Kubernetes copies them to its ReplicaSets), which the takeover changes."""
    return sorted(k for k in before if after[k][1] != before[k][1]
                  or (not k.startswith("Deployment/") and after[k][0] != before[k][0]))
