"""Two modules rendering the same namespace (opensearch and fluentbit both need kubesphere-logging-system):
the first to create it owns it, the other never re-applies it, and no uninstall deletes it while another
module's objects are in it."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.objects.manifests import Manifests
from installer.settings import MODULE_LABEL

pytestmark = pytest.mark.cluster


def test_a_namespace_stays_its_owners_and_outlives_its_owner_while_used(kube_api: client.ApiClient) -> None:
    ns = f"t-shared-{uuid.uuid4().hex[:6]}"
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": ns, "labels": {"kubesphere.io/namespace": ns}}}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b-config", "namespace": ns},
              "data": {"k": "v"}}
    first, second = Manifests(kube_api, "mod-a"), Manifests(kube_api, "mod-b")
    core = client.CoreV1Api(kube_api)
    try:
        first.apply([namespace])
        result = second.apply([{**namespace, "metadata": {"name": ns, "labels": {"other": "label"}}}, config])
        assert f"Namespace/{ns} (belongs to module mod-a)" in result.kept
        labels = core.read_namespace(ns).metadata.labels
        assert labels[MODULE_LABEL] == "mod-a" and labels["kubesphere.io/namespace"] == ns and "other" not in labels
        removed = first.delete([namespace])
        assert any("holds objects of mod-b" in k for k in removed.kept), removed.kept
        assert core.read_namespaced_config_map("b-config", ns).data == {"k": "v"}
        second.delete([config])
        assert first.delete([namespace]).deleted == [f"Namespace/{ns}"]
    finally:
        try:
            core.delete_namespace(ns)
        except ApiException as exc:
            assert exc.status == 404


def test_modules_creating_a_namespace_at_once_agree_on_its_owner(kube_api: client.ApiClient) -> None:
    """Modules run in parallel: of several applying an absent namespace at the same time, exactly one creates and
    owns it and only that one records it; the others find it theirs to leave alone (their drift check would
    otherwise see it "missing" and re-run them)."""
    import threading

    ns = f"t-race-{uuid.uuid4().hex[:6]}"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    modules = [Manifests(kube_api, f"mod-{i}") for i in range(4)]
    results: dict[str, object] = {}
    start = threading.Barrier(len(modules))

    def apply(m: Manifests) -> None:
        start.wait()
        results[m.module] = m.apply([namespace])

    threads = [threading.Thread(target=apply, args=(m,)) for m in modules]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        owner = client.CoreV1Api(kube_api).read_namespace(ns).metadata.labels[MODULE_LABEL]
        recorded = sorted(m for m, r in results.items() if r.applied_refs)  # type: ignore[attr-defined]
        assert recorded == [owner]
        assert all(f"Namespace/{ns} (belongs to module {owner})" in r.kept  # type: ignore[attr-defined]
                   for m, r in results.items() if m != owner)
    finally:
        client.CoreV1Api(kube_api).delete_namespace(ns)
