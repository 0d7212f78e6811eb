"""The original installer's leftovers are only what its records name: its fixed object names (the committed list,
kept equal to what hack/upstream_objects.py derives from tests/parity) or a Helm release's manifest; a label or
kubectl's annotation alone never makes an object the original's."""

from __future__ import annotations

import base64
import gzip
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from installer.engine.adoption import NAMESPACES, _left_over
from installer.objects.originals import RELEASE_LIMIT, release_objects, upstream_objects

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
import upstream_objects as generator  # noqa: E402

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _record(manifest: str | bytes, namespace: str = "kubesphere-monitoring-system") -> Any:
    body = manifest if isinstance(manifest, bytes) else json.dumps({"name": "r", "manifest": manifest}).encode()
    stored = base64.b64encode(gzip.compress(body))  # what Helm stores; the API returns it base64-encoded again
    return SimpleNamespace(data={"release": base64.b64encode(stored).decode()},
                           metadata=SimpleNamespace(namespace=namespace, labels={"owner": "helm", "name": "r"}))


def test_the_committed_list_is_what_the_parity_data_names() -> None:
    assert (REPO / "installer" / "data" / "upstream-objects.json").read_text() == generator.render()
    names = upstream_objects()
    assert ("Deployment", "kubesphere-system", "ks-apiserver") in names  # v3.4.1
    assert ("ConfigMap", "kubesphere-monitoring-system", "notification-manager-template") in names  # v3.3.2 only
    assert not any(name.startswith("ks-installer") for _, _, name in names)


def test_a_helm_release_names_its_objects() -> None:
    manifest = ("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dash\n---\n"
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: dash-viewer\n")
    assert release_objects([_record(manifest)], {"ClusterRole"}) == {
        ("ConfigMap", "kubesphere-monitoring-system", "dash"), ("ClusterRole", "", "dash-viewer")}


def test_a_hostile_release_record_names_nothing() -> None:
    bomb = json.dumps({"manifest": "kind: ConfigMap\nmetadata: {name: x}\n" + " " * (RELEASE_LIMIT + 1)}).encode()
    broken = SimpleNamespace(data={"release": "not base64!"}, metadata=SimpleNamespace(namespace="x", labels={}))
    assert release_objects([_record(bomb), broken, _record(b"[1, 2]"), _record(": not yaml : [")], set()) == set()


def _meta(kind: str, namespace: str | None, name: str, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels, "annotations": {LAST_APPLIED: "{}"}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def test_only_what_the_originals_records_name_is_a_leftover() -> None:
    wanted, released = set(NAMESPACES), {("ClusterRole", "", "dash-viewer")}
    assert _left_over("ConfigMap", _meta("ConfigMap", "kubesphere-monitoring-system", "notification-manager-template"),
                      wanted, released)
    assert _left_over("ClusterRole", _meta("ClusterRole", None, "dash-viewer"), wanted, released)
    # A user's own, applied with kubectl in KubeSphere's namespace or under a KubeSphere name: theirs.
    assert not _left_over("ConfigMap", _meta("ConfigMap", "kubesphere-system", "team-settings"), wanted, released)
    assert not _left_over("PrometheusRule", _meta("PrometheusRule", "kubesphere-monitoring-system", "team-rules"),
                          wanted, released)
    assert not _left_over("ClusterRole", _meta("ClusterRole", None, "kubesphere-team-viewer"), wanted, released)
    # A module's own object is no leftover.
    assert not _left_over("Deployment", _meta("Deployment", "kubesphere-system", "ks-apiserver",
                                              **{"installer.kubesphere.io/module": "ks-core"}), wanted, released)
