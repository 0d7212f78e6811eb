"""Which objects prune and uninstall consider a module's: its label, applied by the installer, of the given kinds."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from installer.manifests import ApplyResult, Manifests, applied_by_installer, ident, parse_kind
from installer.settings import FIELD_MANAGER


def _item(name: str, manager: str, namespace: str | None = "kube-system") -> Any:
    return SimpleNamespace(metadata={"name": name, "namespace": namespace,
                                     "managedFields": [{"manager": manager, "operation": "Apply"}]})


def _manifests(served: dict[tuple[str, str], list[Any]]) -> tuple[Manifests, list[str]]:
    deleted: list[str] = []
    m = Manifests.__new__(Manifests)
    m.module = "monitoring"

    def resource(api_version: str, kind: str) -> Any:
        if (api_version, kind) not in served:
            raise ResourceNotFoundError(f"{api_version}/{kind}")
        # metadata readable both ways, like the dynamic client's ResourceField
        items = [SimpleNamespace(metadata=SimpleNamespace(**i.metadata, get=i.metadata.get))
                 for i in served[(api_version, kind)]]
        return SimpleNamespace(get=lambda label_selector: SimpleNamespace(items=items))

    m._resource = resource  # type: ignore[method-assign]
    m._delete = lambda obj, result, propagation="Background": deleted.append(f"{obj['kind']}/{obj['metadata']['name']}")  # type: ignore
    return m, deleted


def test_parse_kind() -> None:
    assert parse_kind("apps/v1/Deployment") == ("apps/v1", "Deployment")
    assert parse_kind("v1/Endpoints") == ("v1", "Endpoints")
    with pytest.raises(ValueError):
        parse_kind("Endpoints")


def test_applied_by_installer_looks_at_the_field_manager() -> None:
    assert applied_by_installer(_item("etcd", FIELD_MANAGER))
    # The endpoints controller copies a Service's labels (module label included) onto its Endpoints.
    assert not applied_by_installer(_item("node-exporter", "kube-controller-manager"))
    assert not applied_by_installer(SimpleNamespace(metadata={"name": "x"}))


def test_prune_covers_extra_kinds_skips_foreign_objects_and_unserved_kinds() -> None:
    m, deleted = _manifests({("v1", "Endpoints"): [_item("etcd", FIELD_MANAGER),
                                                   _item("node-exporter", "kube-controller-manager")]})
    result = m.apply([], prune=True, kinds=["v1/Endpoints", "monitoring.coreos.com/v1/Prometheus"])
    assert deleted == ["Endpoints/etcd"]
    assert isinstance(result, ApplyResult)


def test_delete_uses_the_given_kinds() -> None:
    m, deleted = _manifests({("v1", "Endpoints"): [_item("etcd", FIELD_MANAGER)]})
    m._wait_gone = lambda objects, timeout: None  # type: ignore[method-assign]
    m.delete([], kinds=["v1/Endpoints"])
    assert deleted == ["Endpoints/etcd"]


def test_prune_keeps_crds() -> None:
    crd = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    m, deleted = _manifests({crd: [_item("prometheuses.monitoring.coreos.com", FIELD_MANAGER, None)]})
    result = m.apply([], prune=True, kinds=["apiextensions.k8s.io/v1/CustomResourceDefinition"])
    assert deleted == []
    assert result.kept == ["CustomResourceDefinition/prometheuses.monitoring.coreos.com"]


def test_prune_alone_deletes_in_the_foreground_what_the_definition_does_not_name() -> None:
    deployment, statefulset = ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")
    m, _ = _manifests({deployment: [_item("redis", FIELD_MANAGER), _item("redis-ha-haproxy", FIELD_MANAGER)],
                       statefulset: [_item("redis-ha-server", FIELD_MANAGER)]})
    calls: list[tuple[str, str]] = []
    m._delete = lambda obj, result, propagation="Background": calls.append(  # type: ignore[method-assign]
        (obj["metadata"]["name"], propagation)) or result.deleted.append(ident(obj))
    waited: list[str] = []
    m._wait_gone = lambda objects, timeout: waited.extend(o["metadata"]["name"] for o in objects)  # type: ignore
    wanted = [{"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "kube-system"}}
              for kind, name in (("StatefulSet", "redis-ha-server"), ("Deployment", "redis-ha-haproxy"))]
    m.prune(wanted, kinds=["apps/v1/Deployment"])
    assert calls == [("redis", "Foreground")] and waited == ["redis"]
