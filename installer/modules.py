"""The module registry: the single source of truth for what the installer manages.

Each module says how "enabled" is derived from the spec, which spec paths are its inputs (a change to any
of them re-runs the module), which modules must run before it, its upstream status key and its Ansible role (which
playbooks/install.yaml and uninstall.yaml run: installer.engine.plays). Nothing else in the engine names a module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from installer.log_store import external_store, store_kind
from installer.s3_store import external_s3
from installer.settings import CORE_SECRET, NAMESPACE
from installer.spec import Spec, get, under

if TYPE_CHECKING:
    from installer.objects.certs import Layout


@dataclass(frozen=True)
class Switch:
    """How a module's enablement follows from the spec, and the spec paths that decide it.

    The paths matter when a cc lacks them: an absent switch keeps its last applied value (absent is not
    disabled), so only an explicit value uninstalls.
    """

    test: Callable[[Spec], bool]
    paths: tuple[str, ...] = ()

    def __call__(self, spec: Spec) -> bool:
        return self.test(spec)


#: Spec paths every workload module reads (image repository and global scheduling).
GLOBAL_INPUTS = ("local_registry", "namespace_override", "zone", "nodeSelector", "tolerations", "affinity")

always = Switch(lambda _: True)

#: Spec paths that act only when a module is first installed (upstream used the admin password only to create
#: the admin user): a later change re-runs nothing and is reported as ignored.
FIRST_INSTALL_ONLY = {"authentication.adminPassword": (
    "acts only at the first install: the admin user exists, so the change is ignored; change the admin's "
    "password in the console (User admin)")}


def flag(path: str, default: bool = False) -> Switch:
    """Enabled when the boolean at ``path`` is true."""
    return Switch(lambda spec: get(spec, path, default) is True, (path,))


def any_of(*checks: Switch) -> Switch:
    return Switch(lambda spec: any(check(spec) for check in checks), tuple(p for c in checks for p in c.paths))


def all_of(*checks: Switch) -> Switch:
    return Switch(lambda spec: all(check(spec) for check in checks), tuple(p for c in checks for p in c.paths))


def equals(path: str, value: str) -> Switch:
    return Switch(lambda spec: get(spec, path) == value, (path,))


LOG_CONSUMERS = ("logging", "events", "auditing", "servicemesh")
"""Modules that write to the log store (servicemesh: Jaeger's traces)."""
_LOG_CONSUMERS = tuple(f"{c}.enabled" for c in LOG_CONSUMERS)


def _log_store(spec: Spec) -> bool:
    """A log consumer is on and the cc names a log store for it (OpenSearch, or the Elasticsearch curator)."""
    stores = get(spec, "common.opensearch.enabled", True) is True or get(spec, "common.es.enabled") is True
    return stores and any(get(spec, p) is True for p in _LOG_CONSUMERS)


def _es(spec: Spec) -> bool:
    """The Elasticsearch path: the curator for an Elasticsearch the user runs (v3.4 ships none)."""
    return store_kind(get(spec, "common") or {}) == "es"


def internal_opensearch(spec: Spec) -> bool:
    """The opensearch module runs its own OpenSearch cluster (not the ES path, no external host)."""
    return not _es(spec) and not external_store(get(spec, "common") or {})


def internal_es_curator(spec: Spec) -> bool:
    """Upstream's ``status.es``: the ES path without an external host."""
    return _es(spec) and not external_store(get(spec, "common") or {})


def _minio(spec: Spec) -> bool:
    wanted = get(spec, "devops.enabled") is True or get(spec, "openpitrix.store.enabled") is True
    return wanted and not external_s3(get(spec, "common"))


log_store_needed = Switch(_log_store, (*_LOG_CONSUMERS, "common.opensearch.enabled", "common.es.enabled"))
# common.s3.endpoint turns MinIO off, but is not a kept switch: removing it is how a user goes back to MinIO.
minio_needed = Switch(_minio, ("devops.enabled", "openpitrix.store.enabled"))

_LOG_BACKEND = ("common.es", "common.opensearch")


def _redis_images(spec: Spec) -> tuple[str, ...]:
    return ("redis", "haproxy") if get(spec, "common.redis.enableHA") is True else ("redis",)


def _config_images(spec: Spec) -> tuple[str, ...]:
    """Images kubesphere.yaml names for KubeSphere to run later: kubectl, the web terminal, gateways, the agent."""
    terminal = () if get(spec, "terminal.image") else ("alpine",)
    agent = ("tower",) if get(spec, "multicluster.clusterRole") == "host" else ()
    return ("kubectl", *terminal, "nginx_ingress_controller", *agent)


def _monitoring_images(spec: Spec) -> tuple[str, ...]:
    """The Prometheus stack with notification-manager (and Grafana when on), unless the cc points at an external
    Prometheus; the DCGM exporter when GPU monitoring is on (with either)."""
    gpu = ("dcgm_exporter",) if get(spec, "monitoring.gpu.nvidia_dcgm_exporter.enabled") is True else ()
    if get(spec, "common.monitoring.type") == "external":
        return gpu
    grafana = ("grafana",) if get(spec, "monitoring.grafana.enabled") is True else ()
    return ("prometheus", "prometheus_operator", "prometheus_config_reloader", "kube_state_metrics",
            "node_exporter", "alertmanager", "kube_rbac_proxy", "notification_manager_operator",
            "notification_manager", "notification_tenant_sidecar", *grafana, *gpu)


def _opensearch_images(spec: Spec) -> tuple[str, ...]:
    """The Elasticsearch curator; or the OpenSearch curator for an external host; or the whole cluster."""
    if _es(spec):
        return ("elasticsearch_curator",)
    if get(spec, "common.opensearch.externalOpensearchHost"):
        return ("opensearch_curator",)
    dashboard = ("opensearch_dashboards",) if get(spec, "common.opensearch.dashboard.enabled") is True else ()
    return ("opensearch", "busybox", "opensearch_curator", *dashboard)


def _edgeruntime_images(spec: Spec) -> tuple[str, ...]:
    """cloudcore and edgeservice; the iptables manager DaemonSet in its external mode only (as users write it)."""
    kubeedge = get(spec, "edgeruntime.kubeedge") or {}
    iptables = {**(kubeedge.get("iptablesManager") or {}), **(kubeedge.get("iptables-manager") or {})}
    external = iptables.get("enabled", True) is True and (iptables.get("mode") or "external") == "external"
    return ("cloudcore", *(("iptables_manager",) if external else ()), "edgeservice")


def _logging_images(spec: Spec) -> tuple[str, ...]:
    """With logging.logsidecar.enabled: logsidecar-injector, its config reloader, and the filebeat and alpine
    images of the sidecar it adds to pods (the fluent-bit CRs name no image)."""
    if get(spec, "logging.logsidecar.enabled") is not True:
        return ()
    return ("log_sidecar_injector", "configmap_reload", "filebeat", "alpine")


def _events_ruler(spec: Spec) -> bool:
    """The events ruler runs (upstream: ``events.ruler.enabled == true``)."""
    return get(spec, "events.ruler.enabled") is True


def _events_images(spec: Spec) -> tuple[str, ...]:
    ruler = ("kube_events_ruler",) if _events_ruler(spec) else ()
    return ("kube_events_operator", "configmap_reload", "kube_events_exporter", *ruler)


_DEVOPS_BUILDERS = ("builder_base", "builder_nodejs", "builder_maven", "builder_maven_jdk11", "builder_python",
                    "builder_go", "builder_go16", "builder_go17", "builder_go18")
_S2I_TEMPLATE_IMAGES = ("s2i_binary", "java_8_centos7", "java_8_runtime", "java_11_centos7", "java_11_runtime",
                        "nodejs_4_centos7", "nodejs_6_centos7", "nodejs_8_centos7", "python_27_centos7",
                        "python_34_centos7", "python_35_centos7", "python_36_centos7", "tomcat85_java8_centos7",
                        "tomcat85_java8_runtime", "tomcat85_java11_centos7", "tomcat85_java11_runtime")


def _devops_images(spec: Spec) -> tuple[str, ...]:
    """ks-devops, Jenkins with its agents' builder images (both flavours: the nodes' container runtime picks one) and
    S2I with its builder templates' images; Argo CD unless the user runs it (devops.argocd.installation: custom)."""
    argocd = () if get(spec, "devops.argocd.installation") == "custom" else (
        "argocd", "argocd_applicationset", "argocd_dex", "argocd_redis")
    return ("devops_apiserver", "devops_controller", "devops_tools", "jenkins", "jnlp_slave", "s2ioperator", "s2irun",
            *_DEVOPS_BUILDERS, *(f"{b}_podman" for b in _DEVOPS_BUILDERS), *_S2I_TEMPLATE_IMAGES, *argocd)

#: Namespaces the registry's entries name (besides the installer's own, NAMESPACE).
_LOGGING, _MONITORING = "kubesphere-logging-system", "kubesphere-monitoring-system"
#: The fluent-bit pipeline's kinds (Input first: fluentbit's own namespace keeps for another module's Inputs).
_PIPELINE_KINDS = tuple(f"logging.kubesphere.io/v1alpha2/{k}" for k in ("Input", "Filter", "Output", "Parser"))


class Namespaces(tuple[str, ...]):
    """A module's namespaces (a tuple of their names), some of them also under the name its role reads them by:
    ``Namespaces("kube-system", devops="kubesphere-devops-system", preinstall=("a", "b"))`` hands the module's runs
    ``ks_devops_namespace`` (a string) and ``ks_preinstall_namespaces`` (a list): :meth:`Module.run_facts`."""

    named: tuple[tuple[str, str | tuple[str, ...]], ...]

    def __new__(cls, *spaces: str, **named: str | tuple[str, ...]) -> Namespaces:
        listed = [n for value in named.values() for n in ((value,) if isinstance(value, str) else value)]
        out = super().__new__(cls, dict.fromkeys((*listed, *spaces)))
        out.named = tuple(named.items())
        return out

    def __getnewargs__(self) -> tuple[str, ...]:  # type: ignore[override]  # a copy or pickle: the names, then named
        return tuple(self)

    def __eq__(self, other: object) -> bool:  # the names the role reads count too (a module's hash covers them)
        return tuple.__eq__(self, other) is True and getattr(other, "named", ()) == self.named

    def __hash__(self) -> int:
        return hash((tuple(self), self.named))

    def variables(self) -> dict[str, Any]:
        return {f"ks_{key}_namespace" if isinstance(value, str) else f"ks_{key}_namespaces":
                value if isinstance(value, str) else list(value) for key, value in self.named}


@dataclass(frozen=True)
class Certificate:
    """A serving certificate the module's role keeps in a Secret (its ``ks_webhook_cert`` call): handed to the
    module's runs as ``ks_<key>_cert`` (:meth:`Module.run_facts`), which the role's task, Service, webhooks and
    volumes read."""

    key: str
    namespace: str
    secret: str
    service: str
    """The Service the certificate is for (its DNS names)."""
    ca_name: str
    cert_name: str
    keys: tuple[str, str, str] = ("ca.crt", "tls.crt", "tls.key")
    """The Secret's keys for the CA certificate, the certificate and its private key."""
    type: str = "Opaque"
    """The Secret's type when it is created."""
    max_validity_days: int | None = None
    """The longest validity a found certificate may have to be kept (None: ks_webhook_cert's default)."""

    @property
    def ref(self) -> tuple[str, str]:
        """``(namespace, name)`` of its Secret."""
        return self.namespace, self.secret

    def layout(self) -> Layout:
        """Its :class:`installer.objects.certs.Layout`, as ``ks_webhook_cert`` builds it from the role's arguments."""
        import datetime as dt

        from installer.objects.certs import MAX_VALIDITY, Layout

        days = self.max_validity_days
        return Layout(self.secret, self.ca_name, self.cert_name, self.keys, self.type,
                      dt.timedelta(days=days) if days else MAX_VALIDITY)

    def variables(self) -> dict[str, Any]:
        return {f"ks_{self.key}_cert": {
            "namespace": self.namespace, "secret": self.secret, "service": self.service, "ca_name": self.ca_name,
            "cert_name": self.cert_name, "keys": list(self.keys), "type": self.type,
            **({"max_validity_days": self.max_validity_days} if self.max_validity_days is not None else {})}}


#: The certificates a takeover keeps as credentials (the original's, when valid).
_CORE_CERT = Certificate("core", NAMESPACE, "ks-controller-manager-webhook-cert", "ks-controller-manager",
                         "ks-controller-manager-ca", "ks-core-admission-webhook")
_NM_CERT = Certificate("monitor_nm", _MONITORING, "notification-manager-webhook-server-cert",
                       "notification-manager-webhook", "webhook-ca", "notification-manager-webhook",
                       type="kubernetes.io/tls", max_validity_days=36501)


@dataclass(frozen=True)
class Module:
    """One installable unit of KubeSphere."""

    name: str
    enabled: Switch
    inputs: tuple[str, ...]
    depends: tuple[str, ...] = ()
    """Run after these when they are enabled; blocked when one of them fails."""
    requires: tuple[str, ...] = ()
    """Must be enabled for this module to be installed; blocked otherwise."""
    after: tuple[str, ...] = ()
    """Run after these when they run in the same reconcile, whether they succeed or not (ordering only)."""
    status_key: str | tuple[tuple[str, Callable[[Spec], bool]], ...] | None = None
    """Dotted key under ``.status`` that upstream tools read (``status.<key>.status: enabled``); or several,
    each with the spec condition under which the module's install says "enabled" there (see status_keys)."""
    workloads: bool = True
    """Whether the module deploys images (so image and scheduling settings are inputs)."""
    console: bool = False
    """The console needs it: the welcome box is printed once every console module is installed."""
    core_phase: bool = False
    """In upstream's first phase (its installRunner's preInstallTasks: preinstall, metrics-server, common, ks-core,
    then ks-config): when one of these is not installed, upstream never reached the step that writes
    ``kubesphere_running`` (installer.engine.welcome)."""
    last: bool = False
    """Run after every other module that installs or upgrades in the same reconcile (ordering only)."""
    images: tuple[str, ...] | Callable[[Spec], tuple[str, ...]] = ()
    """Keys of the image catalogue (roles/kubesphere-defaults) its objects name, or a function of the spec
    for modules whose variants deploy different images (``python -m installer images``)."""
    role: str = ""
    """The role under roles/ that installs it (its ``tasks/uninstall.yaml`` removes it); the module's name if empty."""
    releases: tuple[tuple[str, str], ...] = ()
    """``(namespace, release)`` of the Helm releases an earlier installer (v3.4.1, v3.3.x, older ones it left) made of
    this module's objects: its first successful run retires them (installer.engine.adoption)."""
    namespaces: tuple[str, ...] = ()
    """The namespaces it renders objects into: the only ones from which its prune and uninstall delete anything
    (installer.objects.ownership; checked against every module's render and upstream's objects by
    tests/unit/test_ownership.py). Its role reads those a :class:`Namespaces` names."""
    tenant_kinds: tuple[str, ...] = ()
    """Kinds (``apiVersion/Kind``) besides installer.objects.removal.TENANT_KINDS whose objects of another module keep
    its namespaces from being deleted by its uninstall (handed to its runs: installer.objects.ownership)."""
    certificates: tuple[Certificate, ...] = ()
    """The serving certificates its role keeps (ks_webhook_cert)."""
    credentials: tuple[tuple[str, str], ...] = ()
    """``(namespace, name)`` of the Secrets whose values its generators keep when found (a takeover keeps the original's
    passwords, keys and certificates; installer.engine.adoption names those it found)."""

    def __post_init__(self) -> None:
        if not self.role:
            object.__setattr__(self, "role", self.name)

    def status_keys(self, spec: Spec) -> dict[str, bool]:
        """Each status key the module writes → whether an install with ``spec`` marks it enabled (else the
        key is cleared). An uninstall clears them all."""
        if self.status_key is None:
            return {}
        if isinstance(self.status_key, str):
            return {self.status_key: True}
        return {key: test(spec) for key, test in self.status_key}

    def run_facts(self) -> dict[str, Any]:
        """The registry's facts its role reads (its named namespaces, its certificates), handed to each of its runs
        and renders as variables (installer.engine.plays.play_variables): data, not code, so the module's hash
        covers its own facts (installer.engine.fingerprint), not the whole registry."""
        named = self.namespaces.variables() if isinstance(self.namespaces, Namespaces) else {}
        return {**named, **{k: v for c in self.certificates for k, v in c.variables().items()}}

    def image_keys(self, spec: Spec) -> tuple[str, ...]:
        return self.images(spec) if callable(self.images) else self.images

    @property
    def all_inputs(self) -> tuple[str, ...]:
        return self.inputs + (GLOBAL_INPUTS if self.workloads else ())


MODULES: tuple[Module, ...] = (
    Module("preinstall", always, ("persistence.storageClass", "authentication.adminPassword"), console=True,
           core_phase=True, images=("snapshot_controller",),
           releases=(("kube-system", "snapshot-controller"),),
           namespaces=Namespaces(NAMESPACE, snapshot="kube-system", preinstall=(
               "kubesphere-controls-system", _MONITORING, "kubesphere-monitoring-federated"))),
    Module("metrics_server", flag("metrics_server.enabled"),
           ("metrics_server.nodeSelector", "metrics_server.tolerations", "metrics_server.affinity"), ("preinstall",),
           status_key="metricsServer", core_phase=True, images=("metrics_server",), role="metrics-server",
           releases=(("kube-system", "metrics-server"),),
           namespaces=Namespaces(metrics_server="kube-system")),
    Module("redis", flag("common.redis.enabled"), ("common.redis", "persistence.storageClass"), ("preinstall",),
           status_key="redis", core_phase=True, images=_redis_images,
           releases=((NAMESPACE, "ks-redis"),), credentials=((NAMESPACE, "redis-secret"),),
           namespaces=Namespaces(redis=NAMESPACE)),
    Module("openldap", any_of(flag("common.openldap.enabled"), flag("devops.enabled")),
           ("common.openldap", "persistence.storageClass"), ("preinstall",), status_key="openldap",
           core_phase=True, images=("openldap",),
           releases=((NAMESPACE, "ks-openldap"),), credentials=((NAMESPACE, "openldap-secret"),),
           namespaces=(NAMESPACE,)),
    Module("minio", minio_needed, ("common.minio", "persistence.storageClass"), ("preinstall",), status_key="minio",
           core_phase=True, images=("minio", "mc"),
           releases=((NAMESPACE, "ks-minio"),), credentials=((NAMESPACE, "minio"),),
           namespaces=Namespaces(minio=NAMESPACE)),
    Module("opensearch", log_store_needed, ("common.opensearch", "common.es", "persistence.storageClass"),
           ("preinstall",), status_key=(("opensearch", internal_opensearch), ("es", internal_es_curator)),
           core_phase=True, images=_opensearch_images,
           releases=tuple((_LOGGING, r) for r in ("opensearch-master", "opensearch-data", "opensearch-logging-curator",
                                                  "opensearch-dashboard", "elasticsearch-logging-curator")),
           credentials=((_LOGGING, "opensearch-credentials"),),
           namespaces=Namespaces(opensearch=_LOGGING),
           # the volumes and the fluent-bit pipeline objects other modules put in kubesphere-logging-system
           tenant_kinds=("v1/PersistentVolumeClaim", *_PIPELINE_KINDS)),
    Module("fluentbit", any_of(flag("logging.enabled"), flag("events.enabled"), flag("auditing.enabled")),
           ("common.fluentbit", "common.containersLogMountedPath"), ("preinstall",), status_key="fluentbit",
           core_phase=True, images=("fluentbit_operator", "fluent_bit", "docker"),
           namespaces=Namespaces(fluentbit=_LOGGING), tenant_kinds=_PIPELINE_KINDS[:1]),
    Module("ks-core", always,
           ("common.core.apiserver", "common.core.controllerManager", "common.core.nodeSelector",
            "common.core.tolerations", "common.core.nodeAffinity", "common.core.console.port",
            "common.core.console.type", "common.core.console.extraVolumes", "common.core.console.extraVolumeMounts",
            "authentication.jwtSecret", "authentication.adminPassword", "common.redis.enabled", "common.s3"),
           ("preinstall", "redis", "openldap"), status_key="core", console=True, core_phase=True,
           images=("ks_apiserver", "ks_console", "ks_controller_manager", "nginx_ingress_controller",
                   "defaultbackend", "bookinfo_productpage_v1", "bookinfo_reviews_v1", "bookinfo_details_v1",
                   "bookinfo_ratings_v1"),
           releases=((NAMESPACE, "ks-core"),),
           credentials=((NAMESPACE, CORE_SECRET), _CORE_CERT.ref), certificates=(_CORE_CERT,),
           namespaces=Namespaces(NAMESPACE, core_controls="kubesphere-controls-system")),
    Module("ks-config", always,
           ("authentication", "common.core.console.enableMultiLogin", "common.redis.enabled",
            "common.openldap.enabled", "common.monitoring", "common.gpu", "common.es", "common.opensearch",
            "common.s3", "common.notification", "devops.enabled", "devops.sonarqube", "network",
            "servicemesh.enabled", "openpitrix",
            "multicluster", "logging.enabled", "events.enabled", "auditing.enabled", "alerting.enabled",
            "edgeruntime.enabled", "edgeruntime.kubeedge.enabled", "terminal", "gateway", "local_registry",
            "namespace_override", "zone"),
           ("ks-core", "minio"), workloads=False, console=True, core_phase=True, images=_config_images,
           namespaces=(NAMESPACE,)),
    # Istio's monitors go into servicemesh's istio-system: after servicemesh, which creates (and owns) it.
    Module("monitoring", always,
           ("monitoring", "etcd", "common.monitoring.type", "persistence.storageClass", "servicemesh.enabled"),
           ("preinstall",), after=("servicemesh",), status_key="monitoring", images=_monitoring_images,
           role="ks-monitor",
           releases=((_MONITORING, "notification-manager"), (_MONITORING, "gpu-dcgm-exporter")),
           credentials=(_NM_CERT.ref,), certificates=(_NM_CERT,),
           namespaces=Namespaces("kube-system", monitor=_MONITORING, monitor_istio="istio-system")),
    Module("alerting", flag("alerting.enabled"),
           ("alerting", "monitoring.nodeSelector", "monitoring.tolerations", "monitoring.affinity",
            "common.monitoring.endpoint", "common.monitoring.type"),
           ("monitoring",), requires=("monitoring",), status_key="alerting", images=("thanos",),
           namespaces=Namespaces(alerting=_MONITORING)),
    Module("auditing", flag("auditing.enabled"), ("auditing", *_LOG_BACKEND),
           ("ks-core", "opensearch", "fluentbit"), status_key="auditing",
           images=("auditing_operator", "auditing_webhook"),
           releases=((_LOGGING, "kube-auditing"),),
           namespaces=Namespaces(auditing=_LOGGING)),
    Module("devops", flag("devops.enabled"),
           ("devops", "persistence.storageClass", "common.s3", "servicemesh.enabled"),
           ("ks-core", "openldap", "minio", "monitoring"), status_key="devops", images=_devops_images,
           releases=(("kubesphere-devops-system", "devops"), ("argocd", "devops")),
           credentials=(("kubesphere-devops-system", "devops-jenkins"),),
           certificates=(Certificate("devops_s2i", "kubesphere-devops-system", "s2i-webhook-server-cert",
                                     "webhook-server-service", "s2i-webhook-ca", "webhook-server-service",
                                     ("caBundle", "tls.crt", "tls.key")),),
           # Argo CD goes into "argocd" whatever devops.argocd.namespace says, as upstream's did (that reaches
           # ks-devops only).
           namespaces=Namespaces(devops="kubesphere-devops-system", devops_worker="kubesphere-devops-worker",
                                 devops_argocd="argocd", devops_monitoring=_MONITORING)),
    Module("events", flag("events.enabled"), ("events", *_LOG_BACKEND),
           ("ks-core", "opensearch", "fluentbit"), status_key=(("events.ruler", _events_ruler), ("events", always)),
           images=_events_images,
           releases=((_LOGGING, "ks-events"),),
           certificates=(Certificate("events", _LOGGING, "ks-events-admission", "ks-events-admission",
                                     "kube-events-admission-ca", "ks-events-admission"),),
           namespaces=Namespaces(events=_LOGGING)),
    Module("logging", flag("logging.enabled"), ("logging", *_LOG_BACKEND),
           ("ks-core", "opensearch", "fluentbit"), status_key="logging", images=_logging_images,
           releases=((_LOGGING, "logsidecar-injector"),),
           certificates=(Certificate("logging_injector", _LOGGING, "logsidecar-injector-admission-certs",
                                     "logsidecar-injector-admission", "logsidecar-injector-admission-ca",
                                     f"logsidecar-injector-admission.{_LOGGING}.svc",
                                     ("ca.crt", "server.crt", "server.key")),),
           namespaces=Namespaces(logging=_LOGGING)),
    Module("multicluster", equals("multicluster.clusterRole", "host"), ("multicluster",), ("ks-core",),
           status_key="multicluster", images=("tower", "kubefed"),
           releases=(("kube-federation-system", "kubefed"),),
           certificates=(Certificate("multicluster", "kube-federation-system", "kubefed-admission-webhook-serving-cert",
                                     "kubefed-admission-webhook", "kubefed-admission-webhook-ca",
                                     "kubefed-admission-webhook", type="kubernetes.io/tls"),),
           namespaces=Namespaces(NAMESPACE, "kube-system", multicluster="kube-federation-system",
                                 multicluster_federated="kubesphere-monitoring-federated")),
    Module("network", equals("network.topology.type", "weave-scope"), (), ("ks-core",),
           status_key="network.topology", images=("weave_scope",),
           namespaces=Namespaces(network="weave")),
    # The App Store's S3 settings are kubesphere.yaml's (ks-config); upstream wrote no status for it.
    Module("openpitrix", flag("openpitrix.store.enabled"), ("common.s3",), ("ks-core", "minio"),
           images=("openpitrix_jobs",),
           namespaces=(NAMESPACE,)),
    Module("servicemesh", flag("servicemesh.enabled"), ("servicemesh", *_LOG_BACKEND),
           ("ks-core", "opensearch"), status_key="servicemesh",
           images=("istio_pilot", "istio_proxyv2", "jaeger_operator", "jaeger_agent", "jaeger_collector",
                   "jaeger_query", "jaeger_es_cleaner", "kiali_operator", "kiali"),
           releases=(("istio-system", "jaeger-operator"), ("istio-system", "kiali-operator")),
           namespaces=Namespaces(servicemesh="istio-system"),
           # monitoring's Istio monitors in istio-system
           tenant_kinds=("monitoring.coreos.com/v1/PodMonitor", "monitoring.coreos.com/v1/ServiceMonitor")),
    Module("edgeruntime", all_of(flag("edgeruntime.enabled"), flag("edgeruntime.kubeedge.enabled")), ("edgeruntime",),
           ("ks-core",), status_key="edgeruntime", images=_edgeruntime_images,
           releases=(("kubeedge", "cloudcore"), ("kubeedge", "kubeedge")),
           certificates=(Certificate("edgeruntime", "kubeedge", "cloudcore", "cloudcore", "cloudcore-ca", "cloudcore",
                                     ("streamCA.crt", "stream.crt", "stream.key")),),
           namespaces=Namespaces(edgeruntime="kubeedge")),
    # Gatekeeper's admission webhook reviews every write once registered: it goes in after the others' objects.
    Module("gatekeeper", flag("gatekeeper.enabled"), ("gatekeeper",), ("preinstall",), status_key="gatekeeper",
           images=("gatekeeper",), last=True,
           releases=(("gatekeeper-system", "gatekeeper"),),
           namespaces=Namespaces(gatekeeper="gatekeeper-system")),
    # Telemetry reports to kubesphere.io; it is opt-in here (upstream phoned home unless told not to). It runs last,
    # as upstream, so the report names the modules installed.
    Module("telemetry", flag("telemetry_enabled"), ("multicluster.clusterRole",), ("ks-core", "ks-config"),
           workloads=False, last=True),
)


@cache
def by_name() -> dict[str, Module]:
    return {m.name: m for m in MODULES}


def get_module(name: str) -> Module:
    return by_name()[name]


def switch_paths() -> tuple[str, ...]:
    """Every spec path that decides a module's enablement (they keep their last value when absent)."""
    return tuple(dict.fromkeys(p for m in MODULES for p in m.enabled.paths))


def dependents(name: str) -> tuple[str, ...]:
    """Modules that list ``name`` in ``depends`` or ``requires``."""
    return tuple(m.name for m in MODULES if name in m.depends or name in m.requires)


def dependencies(name: str) -> tuple[str, ...]:
    """Every module ``name`` builds on: its ``depends`` and ``requires``, and theirs, in registry order."""
    found: set[str] = set()
    todo = [name]
    while todo:
        module = get_module(todo.pop())
        for d in module.depends + module.requires:
            if d not in found:
                found.add(d)
                todo.append(d)
    return tuple(m.name for m in MODULES if m.name in found)


def readers(name: str) -> tuple[str, ...]:
    """Other modules whose inputs hold a spec path that switches ``name`` (monitoring reads servicemesh.enabled
    for Istio's monitors): when ``name`` is uninstalled, they stop using it first."""
    paths = get_module(name).enabled.paths
    return tuple(m.name for m in MODULES if m.name != name and any(
        under(p, i) for p in paths for i in m.inputs))


def _check_registry() -> None:
    names = by_name()
    for m in MODULES:
        unknown = set(m.depends + m.requires + m.after) - names.keys()
        if unknown:
            raise ValueError(f"module {m.name} depends on unknown modules {sorted(unknown)}")


_check_registry()
