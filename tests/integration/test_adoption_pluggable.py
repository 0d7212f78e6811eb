"""Taking over a cluster where ks-installer v3.4.1 installed every pluggable module it installed with Helm (events,
auditing, logging, OpenSearch with its dashboard, DevOps with Argo CD and MinIO, Gatekeeper, KubeFed, the service
mesh's operators, KubeEdge): the first reconcile adopts them all in place and retires every one of their releases
(v341_cluster.PLUGGABLE). On a cluster of its own: the modules' webhooks and namespaces would stay in the shared one."""

from __future__ import annotations

from pathlib import Path

import pytest
from v341_cluster import PLUGGABLE, RELEASES

from installer.adoption import RELEASES as ADOPTED_RELEASES

from .test_adoption import own_cluster, take_over

pytestmark = pytest.mark.cluster

#: The releases the fixture makes for PLUGGABLE (installer.adoption.RELEASES names them all).
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


def test_fixture_releases_are_the_originals() -> None:
    """Each release the fixture can make is one the installer retires, for the same module."""
    assert {r.key: r.module for r in RELEASES}.items() <= {f"{ns}/{name}": m for (ns, name), m
                                                           in ADOPTED_RELEASES.items()}.items()


def test_first_reconcile_takes_over_the_pluggable_modules(tmp_path: Path) -> None:
    with own_cluster(tmp_path) as (installer, sim):
        result = take_over(installer, sim, tmp_path, PLUGGABLE)
    made = result.made
    assert made.modules >= {"events", "auditing", "logging", "opensearch", "fluentbit", "devops", "minio",
                            "gatekeeper", "multicluster", "servicemesh", "edgeruntime"}
    assert {k for k, module in made.releases.items() if module} == PLUGGABLE_RELEASES
    for module in ("events", "auditing", "logging", "opensearch", "devops", "gatekeeper", "multicluster",
                   "servicemesh", "edgeruntime"):
        assert made.status[module]["status"] == "enabled", module
    print("\n" + result.table())
