"""What prune and uninstall delete: what the module's recorded inventory names (prune: what this run's inventory
lacks) and it owns (its label, applied by the installer, in its namespaces), through the one deletion policy; the
label query over kinds only where no inventory is recorded."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from installer.engine.runner import MODULE_FILE, killed_runs
from installer.modules import get_module
from installer.objects.manifests import Manifests
from installer.objects.refs import Obj, applied_by_installer, ident, parse_kind, stage, stale_refs
from installer.settings import APPLIED_ANNOTATION, FIELD_MANAGER, MODULE_LABEL, PRUNE_ANNOTATION, PRUNE_DISABLED


def _item(name: str, manager: str, namespace: str | None = "kube-system") -> Any:
    return SimpleNamespace(metadata={"name": name, "namespace": namespace,
                                     "managedFields": [{"manager": manager, "operation": "Apply"}]})


def _manifests(served: dict[tuple[str, str], list[Any]]) -> tuple[Manifests, list[str]]:
    deleted: list[str] = []
    m = Manifests.__new__(Manifests)
    m.module = "monitoring"
    m.namespaces = frozenset(get_module("monitoring").namespaces)  # as its run gets them

    def resource(api_version: str, kind: str) -> Any:
        if (api_version, kind) not in served:
            raise ResourceNotFoundError(f"{api_version}/{kind}")
        # metadata readable both ways, like the dynamic client's ResourceField
        items = [SimpleNamespace(metadata=SimpleNamespace(**i.metadata, get=i.metadata.get),
                                 to_dict=lambda i=i: {"metadata": dict(i.metadata)})
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


def test_delete_uses_the_given_kinds() -> None:
    m, deleted = _manifests({("v1", "Endpoints"): [_item("etcd", FIELD_MANAGER)]})
    m._wait_gone = lambda objects, timeout: None  # type: ignore[method-assign]
    m.delete([], kinds=["v1/Endpoints"])
    assert deleted == ["Endpoints/etcd"]




# --- The recorded inventory ----------------------------------------------------------------------------------


def test_stale_refs_are_what_the_recorded_inventory_has_and_the_run_lacks() -> None:
    recorded = [("apps/v1", "Deployment", "ns", "a"), ("v1", "ConfigMap", "ns", "b"),
                ("policy/v1beta1", "PodDisruptionBudget", "ns", "c")]
    current = [["apps/v1", "Deployment", "ns", "a"], ("policy/v1", "PodDisruptionBudget", "ns", "c")]
    # A role moving an object to another version of its group keeps it (the same object).
    assert stale_refs(recorded, current) == [("v1", "ConfigMap", "ns", "b")]
    assert stale_refs(recorded, recorded) == []


def test_stages() -> None:
    assert stage("v1", "Namespace") == stage("apiextensions.k8s.io/v1", "CustomResourceDefinition") == 0
    assert {stage(v, k) for v, k in (("apps/v1", "Deployment"), ("v1", "Secret"), ("policy/v1", "PodDisruptionBudget"),
                                     ("rbac.authorization.k8s.io/v1", "ClusterRole"))} == {1}
    assert {stage(v, k) for v, k in (("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
                                     ("apiregistration.k8s.io/v1", "APIService"),
                                     ("monitoring.coreos.com/v1", "ServiceMonitor"))} == {2}


MODULE = "monitoring"
NS = "kubesphere-monitoring-system"


def _live(module: str | None = MODULE, manager: str = FIELD_MANAGER, applied: bool = True,
          kept: bool = False) -> Obj:
    """An object's live metadata (``kept``: annotated to be kept on uninstall, as roles render or generate it)."""
    return {"labels": {MODULE_LABEL: module} if module else {}, "managedFields": [{"manager": manager}],
            "annotations": {**({APPLIED_ANNOTATION: "d"} if applied else {}),
                            **({PRUNE_ANNOTATION: PRUNE_DISABLED} if kept else {})}}


class Cluster:
    """A fake cluster for :class:`Manifests`: live objects by ``(kind, name)``; what is deleted, in which order,
    and what each wait waited for."""

    def __init__(self, live: dict[tuple[str, str], Obj]) -> None:
        self.live = live
        self.deleted: list[tuple[str, str]] = []
        self.waits: list[list[str]] = []
        self.m = Manifests.__new__(Manifests)
        self.m.module = MODULE
        self.m.namespaces = frozenset(get_module(MODULE).namespaces)  # as its run gets them
        self.m._resource = lambda api_version, kind: kind  # type: ignore[method-assign]
        self.m._get = self._get  # type: ignore[method-assign]
        self.m._delete = self._delete  # type: ignore[method-assign]
        self.m._wait_gone = lambda objects, timeout: self.waits.append([ident(o) for o in objects])  # type: ignore
        self.m._has_resources = lambda name: False  # type: ignore[method-assign]
        self.m._has_pvcs = lambda namespace: False  # type: ignore[method-assign]
        self.m._other_modules_in = lambda namespace: []  # type: ignore[method-assign]
        self.m._stateful_claims = lambda owned: []  # type: ignore[method-assign]

    def _get(self, kind: str, obj: Obj) -> Any:
        meta = self.live.get((kind, obj["metadata"]["name"]))
        if meta is None or (kind, obj["metadata"]["name"]) in self.deleted:
            return None
        return SimpleNamespace(to_dict=lambda: {"metadata": {"name": obj["metadata"]["name"], **meta}})

    def _delete(self, obj: Obj, result: Any, propagation: str = "Background") -> None:
        self.deleted.append((obj["kind"], obj["metadata"]["name"]))
        result.deleted.append(ident(obj))
        result.deleted_refs.append((obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace") or "",
                                    obj["metadata"]["name"]))


def test_prune_deletes_what_the_run_no_longer_makes_through_the_deletion_policy() -> None:
    cluster = Cluster({("Deployment", "kept-rendered"): _live(), ("ConfigMap", "dropped"): _live(),
                       ("ConfigMap", "moved"): _live("alerting"), ("ConfigMap", "users"): _live(None, "kubectl"),
                       ("ConfigMap", "relabelled"): _live(manager="kubectl"),
                       ("Secret", "password"): _live(applied=False), ("PersistentVolumeClaim", "data"): _live(),
                       ("ConfigMap", "gone"): _live()})
    cluster.deleted.append(("ConfigMap", "gone"))  # deleted by someone since
    recorded = [("v1", kind, NS, name) for kind, name in cluster.live]
    current = [("v1", "Deployment", NS, "kept-rendered")]
    result = cluster.m.prune_inventory(recorded, current)
    assert cluster.deleted[1:] == [("ConfigMap", "dropped")]
    # Kept by the policy, and so still the module's: the generated password, the volume.
    assert sorted(result.kept) == [f"PersistentVolumeClaim/{NS}/data", f"Secret/{NS}/password (generated)"]
    assert sorted(r[1] for r in result.survivors) == ["PersistentVolumeClaim", "Secret"]
    # Never an object that is another module's or the user's now, nor one the installer did not write.
    assert not result.spared


def test_prune_before_an_apply_waits_in_the_foreground() -> None:
    cluster = Cluster({("Deployment", "redis"): _live(), ("StatefulSet", "redis-ha-server"): _live()})
    calls: list[str] = []
    cluster.m._delete = lambda obj, result, propagation="Background": calls.append(  # type: ignore[method-assign]
        propagation) or result.deleted.append(ident(obj))
    recorded = [("apps/v1", "Deployment", NS, "redis"), ("apps/v1", "StatefulSet", NS, "redis-ha-server")]
    cluster.m.prune_inventory(recorded, recorded[1:], propagation="Foreground", timeout=60)
    assert calls == ["Foreground"] and cluster.waits == [[f"Deployment/{NS}/redis"]]


def test_a_prune_spares_what_lies_outside_the_module_s_namespaces() -> None:
    cluster = Cluster({("ConfigMap", "planted"): _live()})
    result = cluster.m.prune_inventory([("v1", "ConfigMap", "default", "planted")], [])
    assert cluster.deleted == [] and result.spared == [
        "ConfigMap/default/planted: namespace default is not one of module monitoring's"]


def _uninstall_cluster() -> tuple[Cluster, list[tuple[str, str, str, str]]]:
    cluster = Cluster({("Namespace", NS): _live(), ("Deployment", "operator"): _live(),
                       ("Prometheus", "k8s"): _live(), ("ValidatingWebhookConfiguration", "hook"): _live(),
                       ("Secret", "password"): _live(applied=False, kept=True),
                       ("Workspace", "system-workspace"): _live(kept=True),
                       ("CustomResourceDefinition", "prometheuses.monitoring.coreos.com"): _live(),
                       ("ConfigMap", "users"): _live(None, "kubectl")})
    refs = [("v1", "Namespace", "", NS), ("apps/v1", "Deployment", NS, "operator"),
            ("monitoring.coreos.com/v1", "Prometheus", NS, "k8s"),
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "hook"),
            ("v1", "Secret", NS, "password"), ("tenant.kubesphere.io/v1alpha2", "Workspace", "", "system-workspace"),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "prometheuses.monitoring.coreos.com"),
            ("v1", "ConfigMap", NS, "users")]
    return cluster, refs


def test_uninstall_deletes_the_recorded_inventory_last_stage_first_and_keeps_what_the_policy_keeps() -> None:
    cluster, refs = _uninstall_cluster()
    result = cluster.m.uninstall(refs)
    assert cluster.deleted == [("ValidatingWebhookConfiguration", "hook"), ("Prometheus", "k8s"),
                               ("Deployment", "operator"), ("Namespace", NS)]
    # Each stage is gone before the next starts (the operator still runs while its custom resources go).
    assert cluster.waits == [["ValidatingWebhookConfiguration/hook", f"Prometheus/{NS}/k8s"],
                             [f"Deployment/{NS}/operator"], [f"Namespace/{NS}"]]
    # By the policy: the CRD (its kind), the annotated credential and workspace (installer.kubesphere.io/prune).
    assert sorted(result.kept) == ["CustomResourceDefinition/prometheuses.monitoring.coreos.com",
                                   f"Secret/{NS}/password ({PRUNE_ANNOTATION}: disabled)",
                                   f"Workspace/system-workspace ({PRUNE_ANNOTATION}: disabled)"]


def test_a_purge_deletes_the_kept_credentials_but_never_what_a_role_keeps_for_good() -> None:
    cluster, refs = _uninstall_cluster()
    cluster.m._owned = lambda kinds, result, keep=None: []  # type: ignore[method-assign]  # no other PVC or Secret
    result = cluster.m.uninstall(refs, purge=True)
    assert ("Workspace", "system-workspace") not in cluster.deleted
    assert ("Secret", "password") in cluster.deleted and ("CustomResourceDefinition",
                                                          "prometheuses.monitoring.coreos.com") in cluster.deleted
    assert result.kept == [f"Workspace/system-workspace ({PRUNE_ANNOTATION}: disabled)"]


def test_uninstall_without_a_recorded_inventory_looks_for_the_module_s_label_over_every_served_kind() -> None:
    m, deleted = _manifests({("v1", "Endpoints"): [_item("etcd", FIELD_MANAGER)]})
    m._wait_gone = lambda objects, timeout: None  # type: ignore[method-assign]
    m._served_kinds = lambda: {("v1", "Endpoints"), ("v1", "Pod")}  # type: ignore[method-assign]
    m.uninstall(None)
    assert deleted == ["Endpoints/etcd"]


def test_an_uninstall_waits_only_for_what_it_deleted() -> None:
    cluster = Cluster({("Namespace", NS): _live(), ("Deployment", "grafana"): _live(),
                       ("PersistentVolumeClaim", "grafana-storage"): _live(),
                       ("CustomResourceDefinition", "prometheuses.monitoring.coreos.com"): _live(),
                       ("Secret", "password"): _live(applied=False, kept=True)})
    cluster.m._has_pvcs = lambda namespace: True  # type: ignore[method-assign]
    refs = [("v1", "Namespace", "", NS), ("apps/v1", "Deployment", NS, "grafana"),
            ("v1", "PersistentVolumeClaim", NS, "grafana-storage"),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "prometheuses.monitoring.coreos.com"),
            ("v1", "Secret", NS, "password")]
    result = cluster.m.uninstall(refs)
    assert cluster.deleted == [("Deployment", "grafana")]
    # The kept volume, CRD and namespace holding the volume are never waited for (they never go).
    assert [w for w in cluster.waits if w] == [[f"Deployment/{NS}/grafana"]]
    assert sorted(result.kept) == ["CustomResourceDefinition/prometheuses.monitoring.coreos.com",
                                   f"Namespace/{NS} (holds PersistentVolumeClaims)",
                                   f"PersistentVolumeClaim/{NS}/grafana-storage",
                                   f"Secret/{NS}/password ({PRUNE_ANNOTATION}: disabled)"]


def test_an_install_prunes_the_module_s_labelled_objects_besides_its_recorded_inventory() -> None:
    cluster = Cluster({})
    recorded = [("v1", "ConfigMap", NS, "recorded"), ("policy/v1beta1", "PodDisruptionBudget", NS, "pdb")]
    labelled = [("v1", "ConfigMap", NS, "left-behind"), ("policy/v1", "PodDisruptionBudget", NS, "pdb")]
    # Read once for every module; another module's objects, and the module's own outside its namespaces, never.
    cluster.m.labelled = lambda: {MODULE: [*labelled, ("v1", "ConfigMap", "default", "elsewhere")],  # type: ignore
                                  "redis": [("v1", "ConfigMap", NS, "redis-thing")]}
    # An upgrade prunes against its recorded inventory alone (no query over every kind).
    assert cluster.m.prune_base(recorded, install=False) == recorded
    # An install (a first one, or one after the module's record was lost) also against what carries its label:
    # what an earlier installation left; one reference per object whatever its API version.
    assert cluster.m.prune_base(recorded, install=True) == [*recorded, ("v1", "ConfigMap", NS, "left-behind")]
    assert cluster.m.prune_base([], install=True) == labelled


def test_a_killed_runs_inventory_is_read_up_to_its_cut_line(tmp_path: Any) -> None:
    """A run killed while writing its inventory file leaves a line cut short: what the lines before it recorded (the
    objects applied, the UIDs the API server returned) is what the next reconcile records of that run."""
    pdd = tmp_path / "network-abcd1234"
    pdd.mkdir()
    (pdd / MODULE_FILE).write_text("network")
    line = {"applied": [["v1", "Namespace", "", "weave"]], "deleted": [], "spared": [], "foreign": [],
            "facts": {"v1|Namespace||weave": ["7d1c6a3e-0000-4000-8000-000000000001", "c" * 32]}}
    (pdd / "inventory.jsonl").write_text(json.dumps(line) + "\n" + '{"applied": [["rbac.authorization')
    (tmp_path / "stray").mkdir()  # not a run's dir: no module file
    assert killed_runs(tmp_path) == {"network": ([("v1", "Namespace", "", "weave")],
                                                 {"v1|Namespace||weave": line["facts"]["v1|Namespace||weave"]})}
