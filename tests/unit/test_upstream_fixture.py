"""The committed renders of what upstream v3.4.1 and v3.3.2 made (tests/parity/upstream-v341, upstream-v332;
hack/upstream_render.py): the objects of each module are the inventory's (tests/parity/upstream, derived
independently from v3.4.1; v3.3.2's are those less what v3.4.1 added), each step says how upstream applied them, and
no generated credential is committed: every placeholder gets a value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import upstream_fixture
import yaml
from upstream_fixture import TAGS, Credentials, fixtures_dir, load, placeholders

PARITY = Path(__file__).resolve().parents[2] / "tests" / "parity" / "upstream"
#: The inventory with each object's source and Helm release (the shared reference docs, beside the repository).
SHARED = Path(__file__).resolve().parents[3] / "shared" / "docs" / "upstream-inventory"
#: (tag, profile) of every committed render.
PROFILES = [(tag, p.name) for tag in TAGS for p in sorted(fixtures_dir(tag).iterdir())
            if (p / "manifest.json").exists()]
#: The commit each tag names in the fetched checkout (v3.4.1's: the inventory's ``upstream_commit``).
COMMITS = {"v3.3.2": "a215a5daa457e30a49ca023077d684fe083e2f5a"}
Key = tuple[str, str, str]


def inventory(module: str) -> tuple[set[Key], set[Key]]:
    """The inventory's (kind, namespace, name) of a module: those that stay, and the hooks deleted on success."""
    data = json.loads((PARITY / f"{module}.json").read_text())
    kept, hooks = set(), set()
    for o in data["objects"]:
        key = (o["kind"], o["namespace"] or "", o["name"])
        deleted = "hook-succeeded" in (o.get("hook_delete_policy") or "")
        (hooks if deleted else kept).add(key)
    return kept, hooks


def key(ident: str) -> Key:
    kind, *rest = ident.split("/")
    return kind, rest[0] if len(rest) == 2 else "", rest[-1]


def test_profiles_committed() -> None:
    assert {("v3.4.1", "default"), ("v3.4.1", "pluggable"), ("v3.3.2", "default"), ("v3.3.2", "pluggable")} <= set(
        PROFILES)


#: The releases a profile has beyond the default's.
RELEASES = {"v3.4.1/pluggable": {
    "kubesphere-system/ks-minio", "kubesphere-logging-system/opensearch-master", "kubesphere-logging-system/"
    "opensearch-data", "kubesphere-logging-system/opensearch-logging-curator", "kubesphere-logging-system/"
    "opensearch-dashboard", "kubesphere-logging-system/logsidecar-injector", "kubesphere-logging-system/ks-events",
    "kubesphere-logging-system/kube-auditing", "kubesphere-devops-system/devops", "argocd/devops",
    "istio-system/jaeger-operator", "istio-system/kiali-operator", "kube-federation-system/kubefed",
    "kubeedge/cloudcore", "gatekeeper-system/gatekeeper"}}
#: v3.3.2's log store: Elasticsearch and its curator (release elasticsearch-logging{,-curator}), not OpenSearch.
RELEASES["v3.3.2/pluggable"] = {r for r in RELEASES["v3.4.1/pluggable"] if "/opensearch-" not in r} | {
    "kubesphere-logging-system/elasticsearch-logging", "kubesphere-logging-system/elasticsearch-logging-curator"}
#: Where a profile's objects differ from the inventory (made for upstream's default cc), module → (more, fewer):
#: namespaces the pluggable modules need, OpenSearch's dashboard, the namespaces ``helm --create-namespace`` made;
#: Istio itself (``istioctl install``, not rendered) and Gatekeeper's PodSecurityPolicy (not served any more).
DIFFERENCES: dict[str, dict[str, tuple[set[str], set[str]]]] = {"v3.4.1/pluggable": {
    "preinstall": ({"Namespace/istio-system", "Namespace/kube-federation-system", "Namespace/kubesphere-devops-system",
                    "Namespace/kubesphere-logging-system"}, set()),
    "opensearch": ({"Deployment/kubesphere-logging-system/opensearch-dashboard-opensearch-dashboards",
                    "RoleBinding/kubesphere-logging-system/opensearch-dashboard-opensearch-dashboards-dashboards-"
                    "rolebinding", "Service/kubesphere-logging-system/opensearch-dashboard-opensearch-dashboards",
                    "ServiceAccount/kubesphere-logging-system/opensearch-dashboard-opensearch-dashboards-dashboards"},
                   set()),
    "devops": ({"Namespace/argocd"}, set()),
    "multicluster": ({"Namespace/kube-federation-system"}, set()),
    "edgeruntime": ({"Namespace/kubeedge"}, set()),
    "gatekeeper": ({"Namespace/gatekeeper-system"}, {"PodSecurityPolicy/gatekeeper-admin"}),
}, "v3.3.2/default": {
    # v3.4.1 added the alerting RuleGroups (CRDs, webhooks) and the cluster.kubesphere.io webhook to ks-core's chart
    "ks-core": (set(), {"CustomResourceDefinition/clusterrulegroups.alerting.kubesphere.io",
                        "CustomResourceDefinition/globalrulegroups.alerting.kubesphere.io",
                        "CustomResourceDefinition/rulegroups.alerting.kubesphere.io",
                        "MutatingWebhookConfiguration/rulegroups.alerting.kubesphere.io",
                        "ValidatingWebhookConfiguration/cluster.kubesphere.io",
                        "ValidatingWebhookConfiguration/rulegroups.alerting.kubesphere.io"}),
    # ... notification-manager 2.3.0's routers, silences and Chinese templates, and prometheus/kubesphere (the
    # GlobalRuleGroups and KubeSphere's ServiceMonitors, ks-core-monitor.yaml)
    "monitoring": (set(), {"ConfigMap/kubesphere-monitoring-system/zh-cn",
                           "CustomResourceDefinition/routers.notification.kubesphere.io",
                           "CustomResourceDefinition/silences.notification.kubesphere.io",
                           "ServiceMonitor/kubesphere-monitoring-system/ks-apiserver",
                           "ServiceMonitor/kubesphere-monitoring-system/ks-controller-manager",
                           *(f"GlobalRuleGroup/{n}" for n in (
                               "alertmanager-rules", "config-reloaders", "ks-apiserver", "ks-controller-manager",
                               "kube-apiserver-slos", "kube-state-metrics", "kubernetes-apps", "kubernetes-resources",
                               "kubernetes-storage", "kubernetes-system", "kubernetes-system-apiserver",
                               "kubernetes-system-controller-manager", "kubernetes-system-kubelet",
                               "kubernetes-system-scheduler", "node-exporter", "prometheus",
                               "prometheus-operator"))}),
}}
_V341_PLUGGABLE = DIFFERENCES["v3.4.1/pluggable"]
_OPENSEARCH = {f"{kind}/kubesphere-logging-system/{name}" for kind, names in (
    ("ConfigMap", ("opensearch-cluster-data-config", "opensearch-cluster-master-config",
                   "opensearch-logging-curator-opensearch-curator-config")),
    ("CronJob", ("opensearch-logging-curator-opensearch-curator",)),
    ("PodDisruptionBudget", ("opensearch-cluster-data-pdb", "opensearch-cluster-master-pdb")),
    ("Secret", ("opensearch-credentials",)),
    ("Service", ("opensearch-cluster-data", "opensearch-cluster-data-headless", "opensearch-cluster-master",
                 "opensearch-cluster-master-headless")),
    ("StatefulSet", ("opensearch-cluster-data", "opensearch-cluster-master"))) for name in names}
_ELASTICSEARCH = {f"{kind}/kubesphere-logging-system/{name}" for kind, names in (
    ("ConfigMap", ("elasticsearch-logging", "elasticsearch-logging-curator-elasticsearch-curator-config")),
    ("CronJob", ("elasticsearch-logging-curator-elasticsearch-curator",)),
    ("Service", ("elasticsearch-logging-data", "elasticsearch-logging-discovery")),
    ("ServiceAccount", ("elasticsearch-logging-data", "elasticsearch-logging-master")),
    ("StatefulSet", ("elasticsearch-logging-data", "elasticsearch-logging-discovery"))) for name in names}
#: v3.3.2 with every component on: what v3.4.1's pluggable profile differs by (namespaces, Gatekeeper's PSP) and
#: v3.3.2's default one (ks-core, monitoring), and: Elasticsearch 6.8 (chart elasticsearch 1.22.1) and its curator
#: instead of OpenSearch; the Fluent Bit Outputs ``es``, ``es-events``, ``es-auditing``; no ClusterStepTemplates
#: (ks-devops 0.1.19), no jaeger-secret (only with the Elasticsearch's basic auth), no federated notification types
#: (v3.4.1's ks-multicluster added them), no KubeEdge apps/operations CRDs (cloudcore 0.2.0 of v3.3.2 had fewer).
DIFFERENCES["v3.3.2/pluggable"] = {
    **_V341_PLUGGABLE, **DIFFERENCES["v3.3.2/default"],
    "opensearch": (_ELASTICSEARCH, _OPENSEARCH),
    "events": ({"Output/kubesphere-logging-system/es-events"}, {"Output/kubesphere-logging-system/opensearch-events"}),
    "auditing": ({"Output/kubesphere-logging-system/es-auditing"},
                 {"Output/kubesphere-logging-system/opensearch-auditing"}),
    "logging": ({"Output/kubesphere-logging-system/es"}, {"Output/kubesphere-logging-system/opensearch"}),
    "devops": (_V341_PLUGGABLE["devops"][0], {"CustomResourceDefinition/clustersteptemplates.devops.kubesphere.io",
                                               *(f"ClusterStepTemplate/{n}" for n in (
                                                   "archiveartifacts", "build", "cd", "checkout", "container", "echo",
                                                   "error", "git", "input", "junit", "mail", "retry", "script",
                                                   "shell", "sleep", "timeout", "waitforqualitygate",
                                                   "withcredentials", "withsonarqubeenv"))}),
    "servicemesh": (set(), {"Secret/istio-system/jaeger-secret"}),
    "multicluster": (_V341_PLUGGABLE["multicluster"][0], {
        "CustomResourceDefinition/federatednotificationmanagers.types.kubefed.io",
        "CustomResourceDefinition/federatednotificationrouters.types.kubefed.io",
        "CustomResourceDefinition/federatednotificationsilences.types.kubefed.io",
        "FederatedNamespace/kubesphere-monitoring-federated/kubesphere-monitoring-federated",
        *(f"FederatedTypeConfig/kube-federation-system/{n}.notification.kubesphere.io"
          for n in ("notificationmanagers", "routers", "silences"))}),
    "edgeruntime": (_V341_PLUGGABLE["edgeruntime"][0], {
        "CustomResourceDefinition/edgeapplications.apps.kubeedge.io",
        "CustomResourceDefinition/nodegroups.apps.kubeedge.io",
        "CustomResourceDefinition/nodeupgradejobs.operations.kubeedge.io"}),
}
#: The shared inventory's variant files a profile turns on, per module (their Helm releases join the module's).
VARIANTS: dict[str, dict[str, tuple[str, ...]]] = {"v3.4.1/pluggable": {"opensearch": ("opensearch-dashboard",)}}
#: Hooks a tag's charts did not have: v3.3.2's notification-manager (1.4.0) had no post-install Job.
NO_HOOKS = {"v3.3.2": {"monitoring"}}
#: CRDs a tag's ``helm install`` created from the chart's crds/ where v3.4.1's task applied them with kubectl first:
#: v3.3.2 applied notification-manager's only over a release of 1.0.0.
HELM_CREATED = {"v3.3.2": {"CustomResourceDefinition/configs.notification.kubesphere.io",
                           "CustomResourceDefinition/notificationmanagers.notification.kubesphere.io",
                           "CustomResourceDefinition/receivers.notification.kubesphere.io"}}
#: How upstream applied an object again after an earlier step (each step holds an object once).
AGAIN = ("kubectl-apply", "kubectl-label-namespace")


def istio(k: Key) -> bool:
    """An object of ``istioctl install`` (not rendered): its revision 1-14-6 or Istio in its name."""
    return ("istio" in k[2] or k[2].endswith("-1-14-6")) and not any(n in k[2] for n in ("jaeger", "kiali"))


@pytest.mark.parametrize(("tag", "profile"), PROFILES)
def test_objects_are_the_inventorys(tag: str, profile: str) -> None:
    """Per module: the same kinds, namespaces and names as the inventory, in the order upstream applied them
    (namespaces first, CRDs before their custom resources), each once (or applied again by a later kubectl step)."""
    fixture = load(profile, tag)
    name = f"{tag}/{profile}"
    for module, steps in fixture.modules.items():
        idents = [i for s in steps for i in s.idents]
        seen: set[str] = set()
        for step in steps:
            assert len(step.idents) == len(set(step.idents)), (module, step.source)
            assert step.how in AGAIN or not seen & set(step.idents), (module, step.source, seen & set(step.idents))
            seen |= set(step.idents)
        kept, hooks = inventory(module)
        if module == "preinstall":  # upstream only labels kube-node-lease, which the inventory lists too
            kept.discard(("Namespace", "", "kube-node-lease"))
        more, fewer = DIFFERENCES.get(name, {}).get(module, (set(), set()))
        istioctl = {k for k in kept if istio(k)} if profile != "default" and module == "servicemesh" else set()
        kept -= istioctl
        assert {key(i) for i in idents} == (kept | {key(i) for i in more}) - {key(i) for i in fewer}, module
        if (SHARED / f"{module}.json").exists():
            # A chart's CRDs upstream applied with kubectl first ("Create or update CRDs manually"; helm then skips
            # them) are kubectl's, though the inventory names them by the chart that holds them.
            applied = {key(i) for s in steps for i in s.idents if s.how == "kubectl-apply"}
            files = (module, *VARIANTS.get(name, {}).get(module, ()))
            released = {(o["kind"], o["namespace"] or "", o["name"]) for f in files
                        for o in json.loads((SHARED / f"{f}.json").read_text())["objects"] if o.get("helm_release")}
            unmade = hooks | applied | istioctl | {key(i) for i in fewer}
            helm = {key(i) for s in steps for i in s.idents if s.how in ("helm", "helm-crds")}
            created = {key(i) for i in HELM_CREATED.get(tag, set())} & helm
            more_released = {key(i) for i in more} & helm  # another tag's chart (v3.3.2's Elasticsearch)
            assert helm - applied == (released - unmade) | created | more_released, module
        # A hook named at random per install: the inventory names its template, the render "<random>".
        hooks = {(k, ns, "<random>" if "<" in n else n) for k, ns, n in hooks} if module not in NO_HOOKS.get(
            tag, set()) else set()
        assert {key(h) for s in steps for h in s.hooks_deleted} == hooks, module
        kinds = [i.split("/")[0] for i in idents]
        crds = {o["spec"]["names"]["kind"] for s in steps for o in s.objects
                if o["kind"] == "CustomResourceDefinition"}
        for kind in crds & set(kinds):
            assert kinds.index("CustomResourceDefinition") < kinds.index(kind), (module, kind)


@pytest.mark.parametrize(("tag", "profile"), PROFILES)
def test_steps_say_how_upstream_applied_them(tag: str, profile: str) -> None:
    fixture = load(profile, tag)
    assert fixture.manifest["tag"] == tag
    commit = COMMITS.get(tag) or json.loads((PARITY / "ks-core.json").read_text())["upstream_commit"]
    assert fixture.manifest["commit"] == commit
    releases = set()
    for module, steps in fixture.modules.items():
        for step in steps:
            assert step.how in upstream_fixture.HOW, (module, step.how)
            if step.how == "helm":
                assert step.release and step.namespace and step.chart and step.chart_version, (module, step)
                releases.add(f"{step.namespace}/{step.release}")
            assert step.objects or step.patches, (module, step.how)
    default = {"kube-system/snapshot-controller", "kubesphere-system/ks-core", "kubesphere-system/ks-openldap",
               "kubesphere-monitoring-system/notification-manager"}
    assert releases == default | RELEASES.get(f"{tag}/{profile}", set())


@pytest.mark.parametrize(("tag", "profile"), PROFILES)
def test_no_credential_committed_and_each_placeholder_filled(tag: str, profile: str) -> None:
    """What upstream generated is a placeholder; the fixture's values fill every one (a Secret's data and a
    caBundle base64, certificates that the CA signs for the chart's names)."""
    text = "".join(p.read_text() for p in (fixtures_dir(tag) / profile).iterdir())
    assert "PRIVATE KEY" not in text and "BEGIN CERTIFICATE" not in text
    fixture = load(profile, tag)
    names = placeholders(fixture)
    # notification-manager 1.4.0 (v3.3.2) shipped a fixed key pair (tls.yaml), generated nothing
    generated = {"notification-manager/ca.crt", "notification-manager/tls.crt", "notification-manager/tls.key"}
    assert {"kubesphere-secret/secret", "kubesphere-secret/token", "redis-secret/auth", "ks-core/ca.crt",
            "ks-core/tls.crt", "ks-core/tls.key", *(generated if tag != "v3.3.2" else ())} <= names
    creds = Credentials(fixture)
    filled = [creds.fill(o) for steps in fixture.modules.values() for s in steps for o in s.objects]
    assert "<generated:" not in json.dumps(filled)
    secret = next(o for o in filled if o["kind"] == "Secret" and o["metadata"]["name"] == "kubesphere-secret")
    assert set(secret["data"]) == {"token", "secret"}
    config = next(o for o in filled if o["metadata"]["name"] == "kubesphere-config" and o["kind"] == "ConfigMap")
    assert f'jwtSecret: "{creds.values["kubesphere-secret/secret"]}"' in config["data"]["kubesphere.yaml"]


def test_fixture_at_an_older_kubernetes_is_what_upstream_made_there() -> None:
    """``at_version``: v3.4.1's objects on v1.21.14 as its templates and charts made them there (versions.json), the
    pinned version's unchanged."""
    def objects(fixture: upstream_fixture.Fixture) -> dict[str, dict]:
        return {f"{m}|{key}": o for m, steps in fixture.modules.items() for s in steps
                for o, key in zip(s.objects, s.idents, strict=True)}

    pinned = objects(load("pluggable"))
    assert objects(upstream_fixture.at_version(load("pluggable"), "v1.34.4")) == pinned
    old = objects(upstream_fixture.at_version(load("pluggable"), "v1.21.14"))
    assert set(pinned) - set(old) == {"ks-core|Secret/kubesphere-system/kubesphere-sa-token"}
    for name in ("prometheus-k8s", "alertmanager-main"):
        assert old[f"monitoring|PodDisruptionBudget/kubesphere-monitoring-system/{name}"]["apiVersion"] == \
            "policy/v1beta1"
    assert "secrets" not in old["ks-core|ServiceAccount/kubesphere-system/kubesphere"]
    config = yaml.safe_load(old["ks-config|ConfigMap/kubesphere-system/kubesphere-config"]["data"]["kubesphere.yaml"])
    assert config["authentication"]["kubectlImage"] == "kubesphere/kubectl:v1.21.0"
    console = old["ks-core|ConfigMap/kubesphere-system/ks-console-config"]["data"]["local_config.yaml"]
    assert yaml.safe_load(console)["client"]["version"]["kubernetes"] == "v1.21.14"
