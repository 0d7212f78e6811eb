"""Switching from KubeSphere 3.3.x: a cluster made of upstream v3.3.2's own objects (tests/parity/upstream-v332,
every component on: the default platform with redis and OpenLDAP, and every pluggable module, logging on v3.3.2's
Elasticsearch; applied as v3.3.2 did) switches to this installer and ends Ready at v3.4.1, where upstream's v3.4.1
installer was the upgrade path (docs/switching.md, "From 3.3.x"). One cluster covers the default platform's checks and
the pluggable modules'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import upstream_fixture
import yaml
from kubernetes import client
from simcluster import SimCluster
from v341_cluster import LOGGING, PLUGGABLE_V332, UPSTREAM_ROLLS, V341Cluster, live, snapshot, uids

from installer.settings import MODULE_LABEL

from .conftest import PLATFORM, Installer
from .test_adoption import cluster, secret_value, take_over  # noqa: F401 (the fixture)
from .test_adoption_pluggable import DEVOPS_RELEASES, NOT_ALIGNED, PLUGGABLE_MODULES, PLUGGABLE_REPLACED, S2I_CERT

pytestmark = pytest.mark.cluster

MONITORING = "kubesphere-monitoring-system"
JAEGER_SECRET = "Secret/istio-system/jaeger-secret"
#: v3.3.2's Elasticsearch, where logging, events, auditing and Jaeger write and ks-apiserver reads.
ES_HOST = "http://elasticsearch-logging-data.kubesphere-logging-system.svc:9200"
#: notification-manager 1.4.0's webhook certificate: its chart shipped a fixed key pair (public; v3.4.1's generates
#: one), which the switch replaces.
NM_CERT = "Secret/kubesphere-monitoring-system/notification-manager-webhook-server-cert"
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
#: Fields of an object that are not its content (what a switch may rewrite without updating it).
META_ONLY = ("metadata", "status")


PROFILE = "pluggable"


def rendered(tag: str) -> dict[str, upstream_fixture.Obj]:
    """``Kind/ns/name`` → object, of upstream's render of every component at ``tag``."""
    fixture = upstream_fixture.load(PROFILE, tag)
    return {i: o for steps in fixture.modules.values() for s in steps for i, o in zip(s.idents, s.objects,
                                                                                       strict=True)}


def released(tag: str) -> dict[str, set[str]]:
    """``namespace/release`` → the idents its Helm record lists, at ``tag``."""
    fixture = upstream_fixture.load(PROFILE, tag)
    return {f"{s.namespace}/{s.release}": set(s.idents) for steps in fixture.modules.values() for s in steps
            if s.how == "helm"}


OLD, NEW = rendered("v3.3.2"), rendered("v3.4.1")
#: The workloads whose pod template upstream v3.4.1 renders differently from v3.3.2 (new images, flags): upstream's
#: ``helm upgrade`` / ``kubectl apply`` rolled them too. With the rolls of the switch from v3.4.1
#: (docs/switching.md's reasons), the only ones the switch may restart.
TEMPLATE_CHANGED = frozenset(k for k, o in OLD.items() if o["kind"] in WORKLOADS and k in NEW
                             and o["spec"]["template"] != NEW[k]["spec"]["template"])
#: v3.3.2's Elasticsearch (release elasticsearch-logging): upstream's v3.4.1 installer kept it as the log store
#: (``status.es`` → ``common.es.enabled``), never upgraded nor deleted it; the switch leaves it so, listed.
ELASTICSEARCH = f"{LOGGING}/elasticsearch-logging"
#: Its curator (release elasticsearch-logging-curator): v3.4.1 upgraded it with its own copy of the same chart
#: (elasticsearch-curator 1.3.3), so its objects are v3.4.1's too; the switch adopts them.
CURATOR = f"{LOGGING}/elasticsearch-logging-curator"
#: ks-apiserver and ks-controller-manager roll twice from 3.3.x: onto ks-core's v3.4.1 template, then (ks-config runs
#: after ks-core) onto v3.4.1's kubesphere.yaml, which differs from v3.3.2's; upstream rolled them once, with the new
#: image, and applied the new kubesphere.yaml afterwards without restarting them.
CONFIG_READERS = frozenset({"Deployment/kubesphere-system/ks-apiserver",
                            "Deployment/kubesphere-system/ks-controller-manager"})
#: What v3.3.2's Helm records list that v3.4.1 renders nowhere: a ``helm upgrade`` deleted it (PVCs and CRDs
#: excepted, which Helm keeps). There is none: every object of the 15 other releases v3.4.1 upgraded is v3.4.1's
#: too (ks-devops 0.1.19 → 0.2.2, jaeger-operator 2.26 → 2.29, kiali-operator 1.38 → 1.50 renamed nothing).
DROPPED = frozenset(i for rel, idents in released("v3.3.2").items() if rel not in (ELASTICSEARCH, CURATOR)
                    for i in idents if i not in NEW
                    and not i.startswith(("PersistentVolumeClaim/", "CustomResourceDefinition/")))


def why(key: str) -> str:
    """Why a workload rolled at the switch (docs/switching.md, "From 3.3.x")."""
    reasons = [r for r, keys in (("v3.4.1's template", TEMPLATE_CHANGED), ("credentials from Secrets", UPSTREAM_ROLLS),
                                 ("README's list", NOT_ALIGNED)) if key in keys]
    return ", ".join(reasons) + (", twice: kubesphere.yaml" if key in CONFIG_READERS else "")


def claim_uids(api: client.ApiClient) -> dict[str, str]:
    """``namespace/name`` → uid of every PersistentVolumeClaim."""
    return {f"{c.metadata.namespace}/{c.metadata.name}": c.metadata.uid
            for c in client.CoreV1Api(api).list_persistent_volume_claim_for_all_namespaces().items}


def content(obj: dict[str, Any]) -> dict[str, Any]:
    """An object without metadata and status (its spec, data, rules, webhooks...), the placeholders' values aside."""
    return {k: v for k, v in obj.items() if k not in META_ONLY}


@pytest.mark.slow(reason="applies upstream v3.3.2's ~700 objects of every component with kubectl and helm, then the "
                        "first reconcile of 17 modules (no render)")
def test_switch_from_upstreams_own_v332_objects_ends_ready_at_v341(cluster: tuple[Installer, SimCluster],  # noqa: F811
                                                                   tmp_path: Path) -> None:
    """The same takeover as from v3.4.1 (test_adoption.take_over: Ready, nothing of the original's lost, its
    managers' fields pruned, its releases retired, its credentials kept), from v3.3.2: the core reports v3.4.1,
    the objects v3.4.1 renders differently are updated to it, the admin's changed password stays, the webhook key
    pair notification-manager 1.4.0's chart published is replaced (named in the log), and only workloads whose
    template v3.4.1 changed roll."""
    installer, sim = cluster
    before: dict[str, dict[str, Any]] = {}
    nm_cert: dict[str, str] = {}
    claims_before: dict[str, str] = {}
    cc_before: dict[str, Any] = {}
    admin_hash = "$2a$10$zcHepmzfKPoxCVCYZr5K7ORPZZ/ySe9p/7IUb/8u./xHrnSX2LOCO"  # a password the user set

    def before_switch(installer: Installer, made: V341Cluster) -> None:
        """Before the switch: the user changed the admin's password; each object's content as v3.3.2 left it."""
        assert installer.status()["core"]["version"] == "v3.3.2"
        cc_before.update(installer.cc())
        assert cc_before["metadata"]["labels"]["version"] == "v3.3.2"  # v3.3.2's own cc, as the user applied it
        sim.kubectl("patch", "users.iam.kubesphere.io", "admin", "--type=merge", "-p",
                    json.dumps({"spec": {"password": admin_hash}}))
        before.update({key: content(obj) for key, obj in snapshot(installer.api, made.refs).items()})
        nm_cert["tls.crt"] = secret_value(installer.api, MONITORING, NM_CERT.split("/")[-1], "tls.crt")
        claims_before.update(claim_uids(installer.api))

    result = take_over(installer, sim, tmp_path, PLUGGABLE_V332, preview=before_switch,
                       may_restart=UPSTREAM_ROLLS | TEMPLATE_CHANGED | NOT_ALIGNED, may_replace=PLUGGABLE_REPLACED,
                       rolls_twice=CONFIG_READERS)
    api, made = installer.api, result.made
    assert made.modules == set(PLATFORM) | set(PLUGGABLE_MODULES)
    # DevOps as from v3.4.1: its webhook certificate, due, replaced in an order its webhooks never distrusted
    # (take_over), the module installed, both releases retired.
    assert made.renewed == S2I_CERT
    assert installer.status()["modules"]["devops"]["phase"] == "Installed"
    assert sorted(result.retired["devops"]) == DEVOPS_RELEASES

    # Ready at v3.4.1, the user's cc as it was (upstream's v3.4.1 deleted it and created it again), the cluster's id
    # kept.
    status = installer.status()
    assert status["core"]["version"] == "v3.4.1", status["core"]
    cc = installer.cc()
    assert (cc["spec"], cc["metadata"]["uid"], cc["metadata"]["labels"]) == (
        cc_before["spec"], cc_before["metadata"]["uid"], cc_before["metadata"]["labels"])
    assert status["clusterId"] == made.status["clusterId"]
    for key in ("Deployment/kubesphere-system/ks-apiserver", "Deployment/kubesphere-system/ks-console",
                "Deployment/kubesphere-system/ks-controller-manager"):
        images = [c["image"] for c in live(api, made.refs[key]).to_dict()["spec"]["template"]["spec"]["containers"]]
        assert any(i.endswith(":v3.4.1") for i in images), (key, images)

    # Updated: each object whose content v3.4.1 renders differently from v3.3.2 changed (the published webhook
    # certificate replaced, below); deleted: what v3.3.2's records list and v3.4.1 does not render (none of the
    # releases v3.4.1 upgraded); the claims (redis', Jenkins', the StatefulSets') are the same objects.
    objects = snapshot(api, {k: ref for k, ref in made.refs.items() if k in made.objects})
    after = {k: content(obj) for k, obj in objects.items()}
    updated = {k for k in after if k in before and after[k] != before[k]}
    # (A claim's size is the cc's: v3.3.2's says jenkinsVolumeSize 8Gi where v3.4.1's says 16Gi; claims are kept.)
    by_v341 = {k for k in OLD if k in NEW and content(OLD[k]) != content(NEW[k])
               and not k.startswith("PersistentVolumeClaim/")}
    assert NM_CERT in by_v341 and not by_v341 - updated, sorted(by_v341 - updated)
    assert not DROPPED, DROPPED
    assert claim_uids(api) == claims_before
    # What v3.4.1 added (the alerting rule groups' CRDs, webhooks and GlobalRuleGroups, notification-manager 2.3.0's
    # CRDs, KubeSphere's ServiceMonitors, ks-devops' ClusterStepTemplates, the federated notification types, ...):
    # there after the switch; not OpenSearch's, nor jaeger-secret (its credentials): the log store stays
    # Elasticsearch (below).
    added = {k: (o["apiVersion"], o["kind"], k.split("/")[1] if k.count("/") == 2 else "", o["metadata"]["name"])
             for k, o in NEW.items() if k not in OLD and "opensearch" not in k and k != JAEGER_SECRET}
    there = uids(api, added)
    assert len(added) > 20 and sorted(k for k in added if k not in there) == []

    # The log store stays v3.3.2's Elasticsearch, as upstream's v3.4.1 kept it (status.es → common.es.enabled): no
    # OpenSearch made, its StatefulSets the same objects and not restarted (take_over), kubesphere.yaml and the Fluent
    # Bit Outputs naming it; its release (which v3.4.1 never upgraded) left, its objects listed; the cc untouched.
    migrations = status.get("migrations") or []
    assert any(m.startswith("common.es.enabled: true (the cc names no log store and status.es says") for m in
               migrations), migrations
    assert status["es"]["status"] == "enabled" and "opensearch" not in status, (status.get("es"), status.keys())
    apps, custom = client.AppsV1Api(api), client.CustomObjectsApi(api)
    assert sorted(s.metadata.name for s in apps.list_namespaced_stateful_set(LOGGING).items) == [
        "elasticsearch-logging-data", "elasticsearch-logging-discovery"]
    config = client.CoreV1Api(api).read_namespaced_config_map("kubesphere-config", "kubesphere-system")
    kubesphere = yaml.safe_load(config.data["kubesphere.yaml"])
    for section in ("logging", "events", "auditing"):
        assert kubesphere[section]["host"] == ES_HOST, (section, kubesphere[section])
    outputs = {o["metadata"]["name"]: o for o in custom.list_namespaced_custom_object(
        "logging.kubesphere.io", "v1alpha2", LOGGING, "outputs")["items"]}
    assert sorted(outputs) == ["es", "es-auditing", "es-events"], sorted(outputs)
    assert {o["spec"]["es"]["host"] for o in outputs.values()} == {ES_HOST.split("//")[1].split(":")[0]}
    jaeger = custom.get_namespaced_custom_object("jaegertracing.io", "v1", "istio-system", "jaegers", "jaeger")
    assert ES_HOST in json.dumps(jaeger["spec"]["storage"]), jaeger["spec"]["storage"]
    unadopted = installer.status()["adoption"]["unadopted"]
    es_objects = sorted(k for r, keys in released("v3.3.2").items() if r == ELASTICSEARCH for k in keys)
    assert [k for k in es_objects if k not in unadopted] == [], unadopted
    assert f"{ELASTICSEARCH}" in installer.status()["adoption"]["helmReleases"]

    # Credentials: the JWT key, redis' password, ks-core's webhook certificate (take_over checks each generated one,
    # none logged), the admin's password as the user set it; notification-manager 1.4.0's certificate, the key pair
    # its chart published, replaced with a warning (as upstream's v3.4.1 chart generated a new one).
    user = live(api, ("iam.kubesphere.io/v1alpha2", "User", "", "admin")).to_dict()
    assert user["spec"]["password"] == admin_hash
    assert "[redis] kept the credentials that were there: Secret/kubesphere-system/redis-secret (keys auth)" in \
        result.log
    assert secret_value(api, MONITORING, NM_CERT.split("/")[-1], "tls.crt") != nm_cert["tls.crt"]
    assert (f"[monitoring] {NM_CERT.split('/', 1)[0]} {NM_CERT.split('/', 1)[1]}: replaced the certificate found "
            "there: its key pair is the one upstream's chart published (the private key is public)") in result.log

    print(f"\nfrom v3.3.2 (every component on): {result.table()}")
    print(f"{'module':<15} {'updated':>8} {'by v3.4.1':>10} {'deleted':>8}  rolled (why); left")
    for module, keys in sorted(made.adopted.items()):
        rolled = [f"{k.split('/')[-1]} ({why(k)})" for k in result.restarted if k in keys]
        left = [k for k in keys if MODULE_LABEL not in (objects[k]["metadata"].get("labels") or {})]
        print(f"{module:<15} {sum(k in updated for k in keys):>8} {sum(k in updated & by_v341 for k in keys):>10} "
              f"{sum(k in DROPPED for k in keys):>8}  {', '.join(rolled) or '-'}; {', '.join(left) or '-'}")
    print("credentials kept:", ", ".join(sorted([*made.credentials, "User/admin spec.password"])),
          f"; replaced: {NM_CERT} (published key pair), {', '.join(made.renewed)} (due)")
