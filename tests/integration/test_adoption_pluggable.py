"""Taking over a cluster where ks-installer v3.4.1 installed every pluggable module (events, auditing, logging,
OpenSearch with its dashboard and curator, Fluent Bit, DevOps with Argo CD, MinIO and OpenLDAP, Gatekeeper, KubeFed,
the service mesh's operators, KubeEdge) from upstream's own objects (tests/parity/upstream-v341/pluggable, rendered by
hack/upstream_render.py from the tag's templates and charts): the first reconcile adopts them all in place and retires
every one of their releases (v341_cluster.PLUGGABLE_UPSTREAM). On a cluster of its own: the modules' webhooks and
namespaces would stay in the shared one."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import upstream_fixture
from v341_cluster import PLUGGABLE_UPSTREAM, UPSTREAM_ROLLS

from installer.config import apply_defaults
from installer.engine.adoption import RELEASES as ADOPTED_RELEASES
from installer.modules import get_module

from .test_adoption import own_cluster, previewed, take_over

pytestmark = pytest.mark.cluster

#: The pluggable modules the fixture holds, each ending ``enabled`` in the cc's status.
PLUGGABLE_MODULES = ("opensearch", "fluentbit", "minio", "events", "auditing", "logging", "devops", "servicemesh",
                     "multicluster", "edgeruntime", "gatekeeper", "redis", "openldap")
#: Upstream's releases for them (installer.engine.adoption.RELEASES names them all).
PLUGGABLE_RELEASES = {
    "kubesphere-system/ks-core", "kubesphere-system/ks-openldap", "kubesphere-system/ks-minio",
    "kube-system/snapshot-controller", "kubesphere-monitoring-system/notification-manager",
    "kubesphere-logging-system/opensearch-master", "kubesphere-logging-system/opensearch-data",
    "kubesphere-logging-system/opensearch-logging-curator", "kubesphere-logging-system/opensearch-dashboard",
    "kubesphere-logging-system/logsidecar-injector", "kubesphere-logging-system/ks-events",
    "kubesphere-logging-system/kube-auditing", "kubesphere-devops-system/devops", "argocd/devops",
    "istio-system/jaeger-operator", "istio-system/kiali-operator", "kube-federation-system/kubefed",
    "kubeedge/cloudcore", "gatekeeper-system/gatekeeper",
}
#: Objects created again in place of upstream's because a field that cannot change differs (named in the log and
#: status.modules.<module>.immutable): the Deployments whose selector v3.4.1's chart made of Helm's labels
#: (Gatekeeper's ``heritage: Helm``; kube-events' and the log sidecar injector's ``app.kubernetes.io/managed-by:
#: Helm``, ``helm.sh/chart`` with the chart's version), which a module's selector does not carry. Their pods are left
#: to the new Deployment.
PLUGGABLE_REPLACED = frozenset({
    "Deployment/gatekeeper-system/gatekeeper-audit", "Deployment/gatekeeper-system/gatekeeper-controller-manager",
    "Deployment/kubesphere-logging-system/ks-events-operator",
    "Deployment/kubesphere-logging-system/logsidecar-injector-deploy"})
#: What the switch may restart, once each: as over the default platform (OpenLDAP's passwords from its Secret,
#: ks-apiserver's and ks-controller-manager's credentials as environment variables). The Deployments above keep their
#: pods: their pod templates keep the charts' Helm labels, so the new Deployment adopts the original's ReplicaSet.
PLUGGABLE_ROLLS = UPSTREAM_ROLLS
#: Workloads the switch restarts because their roles render the pod template otherwise than v3.4.1's charts did, for
#: a reason docs/switching.md gives ("From ks-installer v3.4.1"): ks-devops' and Jenkins' LDAP manager password comes
#: from a Secret as an environment variable (v3.4.1 wrote it into their configuration); OpenSearch's init container
#: runs the busybox that v3.4.1's image list mirrors (1.31.1), not the chart's unpinned ``busybox:latest``. One that
#: restarts and is not here, or is here and no longer restarts, fails the test.
#: The S2I webhook's certificate, due (v341_cluster.PLUGGABLE_UPSTREAM), and the Service it is for.
S2I_CERT = {"Secret/kubesphere-devops-system/s2i-webhook-server-cert": "webhook-server-service"}
#: DevOps' two releases (ks-devops with S2I, and Argo CD), both retired by the module.
DEVOPS_RELEASES = ["argocd/devops", "kubesphere-devops-system/devops"]
NOT_ALIGNED = frozenset({
    *(f"Deployment/kubesphere-devops-system/devops-{name}" for name in ("apiserver", "controller", "jenkins")),
    "StatefulSet/kubesphere-logging-system/opensearch-cluster-master",
    "StatefulSet/kubesphere-logging-system/opensearch-cluster-data",
})


def test_fixture_releases_are_the_originals() -> None:
    """Each release the fixture makes is one the installer retires, for the same module."""
    adopted = {f"{ns}/{name}": m for (ns, name), m in ADOPTED_RELEASES.items()}
    fixture = upstream_fixture.load("pluggable")
    upstream = {f"{s.namespace}/{s.release}": m for m, steps in fixture.modules.items() for s in steps
                if s.how == "helm"}
    assert set(upstream) == PLUGGABLE_RELEASES
    assert upstream.items() <= adopted.items()


@pytest.mark.slow(reason="applies upstream's ~700 objects of every pluggable module with kubectl and helm, then the "
                        "first reconcile of 17 modules (no render)")
@pytest.mark.versions
def test_first_reconcile_takes_over_the_pluggable_modules(tmp_path: Path) -> None:
    with own_cluster(tmp_path) as (installer, sim):
        result = take_over(installer, sim, tmp_path, PLUGGABLE_UPSTREAM,
                           preview=functools.partial(previewed, recreated=PLUGGABLE_REPLACED),
                           may_restart=PLUGGABLE_ROLLS | NOT_ALIGNED, may_replace=PLUGGABLE_REPLACED)
        print("\n" + result.table())
        cc = installer.cc()
    made = result.made
    # DevOps: its webhook certificate, due, replaced while its webhooks trusted the certificate their server served at
    # every step (take_over: renewed_in_order); the module installed; both of its releases retired.
    assert made.renewed == S2I_CERT
    assert cc["status"]["modules"]["devops"]["phase"] == "Installed", cc["status"]["modules"]["devops"]
    assert sorted(result.retired["devops"]) == DEVOPS_RELEASES
    assert "[redis] kept the credentials that were there: Secret/kubesphere-system/redis-secret (keys auth)" in \
        result.log
    assert set(result.restarted) >= NOT_ALIGNED, sorted(NOT_ALIGNED - set(result.restarted))
    assert made.modules >= set(PLUGGABLE_MODULES)
    assert {k for k, module in made.releases.items() if module} == PLUGGABLE_RELEASES
    spec = apply_defaults(json.loads(json.dumps(cc["spec"])))
    for module in PLUGGABLE_MODULES:
        keys = [k for k, on in get_module(module).status_keys(spec).items() if on]
        assert keys, module
        for key in keys:
            node = cc["status"]
            for part in key.split("."):
                node = node[part]
            assert node["status"] == "enabled", (module, key, node)
