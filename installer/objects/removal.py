"""Deleting a module's objects (:class:`Removal`, a part of :class:`installer.objects.manifests.Manifests`):
uninstall and ``state: absent`` (and the prune's deletes: installer.objects.pruning), through one deletion policy
(:meth:`Removal._remove`), in stages.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError, ResourceNotFoundError
from kubernetes.dynamic.resource import ResourceList

from installer.objects.inventory import object_key
from installer.objects.ownership import why_spared
from installer.objects.readiness import backoff, read_live
from installer.objects.refs import (
    LATE_KINDS,
    Obj,
    Ref,
    applied_by_installer,
    ident,
    installer_managed,
    kinds_of,
    obj_of,
    parse_kind,
    rank,
    ref_of,
    stage,
    uninstall_order,
)
from installer.objects.results import ApplyResult, Change
from installer.settings import (
    MODULE_LABEL,
    PRUNE_ANNOTATION,
    PRUNE_DISABLED,
)

PURGE_ENV = "KS_PURGE"
"""Set to ``1`` by the engine for an uninstall that purges: every ``state: absent`` of the run purges."""
KEPT_ON_UNINSTALL = ("PersistentVolumeClaim", "CustomResourceDefinition")
#: Kinds a purge looks at even when the uninstall does not name them (roles keep them out of it otherwise).
PURGED_KINDS = ("v1/PersistentVolumeClaim", "v1/Secret")
TENANT_KINDS = ("v1/ConfigMap", "v1/Secret", "v1/Service", "v1/ServiceAccount", "apps/v1/Deployment",
                "apps/v1/StatefulSet", "apps/v1/DaemonSet", "batch/v1/Job", "batch/v1/CronJob")
"""Kinds whose objects of another module keep a namespace from being deleted."""
#: The note of an object kept by :data:`PRUNE_ANNOTATION`.
PRUNE_KEPT = f"{PRUNE_ANNOTATION}: {PRUNE_DISABLED}"


def prune_disabled(obj: Obj) -> bool:
    """Whether the object (as it exists: its annotations) is kept by its module's uninstall and prune."""
    return ((obj["metadata"].get("annotations") or {}).get(PRUNE_ANNOTATION) == PRUNE_DISABLED)


class Removal:
    """Deleting a module's objects (:class:`Removal`, a part of :class:`installer.objects.manifests.Manifests`):"""

    dyn: DynamicClient
    module: str
    namespaces: frozenset[str] | None
    """The module's namespaces (installer.objects.ownership), the only ones it deletes from."""
    tenant_kinds: tuple[str, ...]
    """More kinds whose objects of another module keep one of its namespaces (``Module.tenant_kinds``)."""

    def remove(self, objects: list[Obj], purge: bool = False) -> ApplyResult:
        """Delete each of ``objects`` (last kind first) that the deletion policy lets go (:meth:`_remove`), without
        waiting: what a prune does to objects the module no longer renders."""
        result = ApplyResult()
        for obj in sorted(objects, key=lambda o: rank(o["kind"]), reverse=True):
            self._remove(obj, result, purge)
        return result

    def delete(self, objects: list[Obj], purge: bool = False, timeout: int = 300,
               kinds: Iterable[str] = ()) -> ApplyResult:
        """Delete every object of the given objects' kinds (plus ``kinds``) that carries this module's label.

        ``purge`` also deletes the module's PVCs and Secrets (a generated password kept with the data it
        guards), the PVCs its StatefulSets (its own, or made by an operator from
        one of its objects, like Prometheus') claimed through volumeClaimTemplates, and its CRDs no custom
        resource is left of."""
        result = ApplyResult()
        wanted = kinds_of(objects, [*kinds, *(PURGED_KINDS if purge else ())])
        self._delete_staged(self._owned(wanted, result), result, purge, timeout)
        return result

    def absent(self, objects: list[Obj], recorded: list[Ref] | None, purge: bool = False, timeout: int = 300,
               kinds: Iterable[str] = ()) -> ApplyResult:
        """What ``ks_manifest`` with ``state: absent`` deletes: exactly ``objects`` when given (:meth:`delete_refs`),
        else the module's labelled objects of ``kinds`` when given (:meth:`delete`), else everything the module
        made (:meth:`uninstall`, ``recorded`` being its recorded inventory)."""
        if objects:
            return self.delete_refs(objects, purge=purge, timeout=timeout)
        if kinds:
            return self.delete([], purge=purge, timeout=timeout, kinds=kinds)
        return self.uninstall(recorded, purge=purge, timeout=timeout)

    def uninstall(self, recorded: list[Ref] | None, purge: bool = False, timeout: int = 300) -> ApplyResult:
        """Delete what the module made: its recorded inventory (``None``: a record without one, whose objects are
        found by the module's label over every kind the API serves, cluster-scoped ones only when
        :meth:`_served_only_by` what it deletes), the last apply stage first (each stage gone
        before the next), through the deletion policy (:meth:`_remove`). An object whose :data:`PRUNE_ANNOTATION`
        is ``disabled`` stays (a password kept with the volume whose data it guards); a purge deletes those of
        :data:`PURGED_KINDS`. A purge also looks at the module's labelled PVCs and Secrets."""
        result = ApplyResult()
        if recorded is None:  # by the label alone: a cluster-scoped object only when it would be left dangling
            found = self._owned(self._served_kinds(), result)
            owned = [o for o in found if o["metadata"].get("namespace")]
            services = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in owned if o["kind"] == "Service"}
            for obj in (o for o in found if not o["metadata"].get("namespace")):
                if self._served_only_by(obj, services):
                    owned.append(obj)
                else:
                    result.spared.append(f"{ident(obj)}: cluster-scoped, and no record of the module names it "
                                         "(a label is no proof of whose it is)")
        else:
            owned = self._owned_refs(recorded, result)
            if purge:
                known = {ident(o) for o in owned}
                owned += [o for o in self._owned(kinds_of([], PURGED_KINDS), result) if ident(o) not in known]
        purged = {parse_kind(k)[1] for k in PURGED_KINDS} if purge else set()
        for obj in owned:
            if prune_disabled(obj) and obj["kind"] not in purged:
                self._keep(obj, result, PRUNE_KEPT)
        owned = [o for o in owned if not prune_disabled(o) or o["kind"] in purged]
        self._delete_staged(owned, result, purge, timeout)
        return result

    def _served_only_by(self, obj: Obj, services: set[tuple[str, str]]) -> bool:
        """Whether ``obj`` is an APIService or webhook configuration every backend of which is one of ``services``
        (those this uninstall deletes): left, it would point at nothing and block discovery (a namespace's
        deletion) or the writes it intercepts. What the API server holds decides, not a label: one that calls a URL
        or another Service stays."""
        if obj["kind"] not in LATE_KINDS:
            return False
        live = self._get(self._resource(obj["apiVersion"], obj["kind"]), obj)
        if live is None:
            return False
        body = live.to_dict()
        configs = [body.get("spec") or {}] if obj["kind"] == "APIService" else \
            [w.get("clientConfig") or {} for w in body.get("webhooks") or []]
        backends = [(c.get("service") or {}) for c in configs]
        return bool(backends) and all((b.get("namespace"), b.get("name")) in services for b in backends)

    def delete_refs(self, objects: list[Obj], purge: bool = False, timeout: int = 300) -> ApplyResult:
        """Delete exactly ``objects`` (those the module owns), through the deletion policy, and wait until they are
        gone: a role's removal of objects it turns off."""
        result = ApplyResult()
        self._delete_staged(self._owned_refs([ref_of(o) for o in objects], result), result, purge, timeout)
        return result

    def _delete_staged(self, owned: list[Obj], result: ApplyResult, purge: bool, timeout: int) -> None:
        """Delete ``owned`` through the deletion policy, the apply stages backwards, each gone before the next."""
        claims = self._stateful_claims(owned) if purge else []
        for level in (2, 1, 0):
            objects = sorted((o for o in owned if stage(o["apiVersion"], o["kind"]) == level), key=uninstall_order)
            for obj in objects:
                self._remove(obj, result, purge)
            self._wait_gone([o for o in objects if ident(o) in result.deleted], timeout)
        for claim in claims:
            self._delete(claim, result)

    def _owned_refs(self, refs: Iterable[Iterable[str]], result: ApplyResult) -> list[Obj]:
        """Of ``refs``, the objects that exist and this module may delete: labelled as its, written by the
        installer and in its namespaces (installer.objects.ownership); the others that carry its label are listed in
        ``result.spared`` with the reason. Each keeps its annotations (a prune looks at them)."""
        out: list[Obj] = []
        for ref in dict.fromkeys(tuple(r) for r in refs):
            obj = obj_of(ref)
            try:
                live = self._get(self._resource(obj["apiVersion"], obj["kind"]), obj)
            except (ResourceNotFoundError, ApiException):  # kind not served (any more): nothing of it is left
                continue
            if live is None:
                continue
            meta = live.to_dict()["metadata"]
            known = self.facts.get(object_key(ref))
            if (meta.get("labels") or {}).get(MODULE_LABEL) != self.module:
                # Handed over (someone took the module's label off) or another module's now: never deleted. A
                # label can only keep an object here, never make one deletable.
                continue
            if known is not None:
                if meta.get("uid") != known[0]:
                    result.spared.append(f"{ident(obj)}: not the object the installer made (another UID)")
                    continue
                obj["metadata"]["uid"] = known[0]
            elif not installer_managed(meta):
                continue
            if (why := why_spared(self.module, ref_of(obj), self.namespaces)) is not None:
                result.spared.append(f"{ident(obj)}: {why}")
                continue
            obj["metadata"]["annotations"] = meta.get("annotations") or {}
            out.append(obj)
        return out

    def _served_kinds(self) -> set[tuple[str, str]]:
        """Every kind the API serves that can be listed and deleted (of each group's kind, its preferred version)."""
        found: dict[tuple[str, str], str] = {}
        for res in self.dyn.resources.search():
            if isinstance(res, ResourceList):  # the client's own List pseudo-resource
                continue
            verbs = getattr(res, "verbs", None) or []
            if "/" in (getattr(res, "name", "") or "/") or "list" not in verbs or "delete" not in verbs:
                continue
            if getattr(res, "preferred", False) or (res.group or "", res.kind) not in found:
                found[(res.group or "", res.kind)] = res.group_version
        return {(version, kind) for (_, kind), version in found.items()}

    def _stateful_claims(self, owned: list[Obj]) -> list[Obj]:
        """PVCs made from the volumeClaimTemplates of StatefulSets this module owns, directly or through an
        owner reference to one of its objects (``<template>-<statefulset>-<ordinal>``)."""
        namespaces = {o["metadata"].get("namespace") for o in owned} - {None, ""}
        namespaces |= {o["metadata"]["name"] for o in owned if o["kind"] == "Namespace"}
        uids = {live.metadata.uid for o in owned if (live := read_live(self.dyn, o)) is not None}
        core = client.CoreV1Api(self.dyn.client)
        apps = client.AppsV1Api(self.dyn.client)
        out: list[Obj] = []
        for ns in sorted(namespaces):
            try:
                sets = apps.list_namespaced_stateful_set(ns).items
                pvcs = core.list_namespaced_persistent_volume_claim(ns).items
            except ApiException:
                continue
            for sts in sets:
                mine = (sts.metadata.labels or {}).get(MODULE_LABEL) == self.module or any(
                    ref.uid in uids for ref in sts.metadata.owner_references or [])
                if not mine:
                    continue
                for template in sts.spec.volume_claim_templates or []:
                    pattern = re.compile(rf"{re.escape(template.metadata.name)}-{re.escape(sts.metadata.name)}-\d+")
                    out += [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             "metadata": {"name": c.metadata.name, "namespace": ns}}
                            for c in pvcs if pattern.fullmatch(c.metadata.name)]
        return out

    def _owned(self, kinds: set[tuple[str, str]], result: ApplyResult) -> list[Obj]:
        """The objects of ``kinds`` this module may delete: labelled as its,
        written by the installer and in its namespaces (installer.objects.ownership); the others that carry its label
        are listed in ``result.spared`` with the reason."""
        selector = f"{MODULE_LABEL}={self.module}"
        out: list[Obj] = []
        for api_version, kind in kinds:
            try:
                items = self._resource(api_version, kind).get(label_selector=selector).items
            except (NotFoundError, ResourceNotFoundError, ApiException):  # kind not served: nothing to find
                continue
            for item in items:
                meta = item.to_dict()["metadata"]
                obj = {"apiVersion": api_version, "kind": kind,
                       "metadata": {"name": meta["name"], "namespace": meta.get("namespace"),
                                    "annotations": meta.get("annotations") or {}}}
                if not applied_by_installer(item):
                    continue
                if (why := why_spared(self.module, ref_of(obj), self.namespaces)) is None:
                    out.append(obj)
                else:
                    result.spared.append(f"{ident(obj)}: {why}")
        return out

    def _remove(self, obj: Obj, result: ApplyResult, purge: bool, propagation: str = "Background") -> None:
        """Delete ``obj`` unless the deletion policy keeps it: PVCs, CRDs (deleting one deletes every object of
        its kind) and namespaces holding PVCs stay unless ``purge``. Prune and uninstall both go through here."""
        why: str | None = None
        if not purge and obj["kind"] in KEPT_ON_UNINSTALL:
            why = ""
        elif obj["kind"] == "CustomResourceDefinition" and self._has_resources(obj["metadata"]["name"]):
            why = "custom resources of it are left"
        elif obj["kind"] == "Namespace" and not purge and self._has_pvcs(obj["metadata"]["name"]):
            why = "holds PersistentVolumeClaims"
        elif obj["kind"] == "Namespace" and (others := self._other_modules_in(obj["metadata"]["name"])):
            why = f"holds objects of {', '.join(others)}"
        if why is None:
            self._delete(obj, result, propagation)
            return
        self._keep(obj, result, why)

    def _keep(self, obj: Obj, result: ApplyResult, why: str) -> None:
        """Record that the deletion policy keeps ``obj`` (``why``: the reason; empty for a kind kept by policy)."""
        result.kept.append(ident(obj) + (f" ({why})" if why else ""))
        self._preview(result, Change(ident(obj), "kept", note=why))

    def _delete(self, obj: Obj, result: ApplyResult, propagation: str = "Background") -> None:
        res = self._resource(obj["apiVersion"], obj["kind"])
        uid = obj["metadata"].get("uid")
        try:
            res.delete(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"),
                       body={"propagationPolicy": propagation, **({"preconditions": {"uid": uid}} if uid else {})})
            result.deleted.append(ident(obj))
            result.deleted_refs.append(ref_of(obj))
        except NotFoundError:
            pass
        except ConflictError:  # replaced meanwhile by an object the installer did not make
            result.spared.append(f"{ident(obj)}: not the object the installer made (another UID)")

    def _has_resources(self, crd_name: str) -> bool:
        """Whether any custom resource of the CRD exists (in any namespace)."""
        try:
            crd = client.ApiextensionsV1Api(self.dyn.client).read_custom_resource_definition(crd_name)
        except ApiException:
            return False
        served = next((v.name for v in crd.spec.versions if v.served), None)
        if served is None:
            return False
        try:
            items = client.CustomObjectsApi(self.dyn.client).list_cluster_custom_object(
                crd.spec.group, served, crd.spec.names.plural, limit=1)
        except ApiException:
            return True  # cannot tell: keep it
        return bool(items.get("items"))

    def _other_modules_in(self, namespace: str) -> list[str]:
        """Other modules with objects of :data:`TENANT_KINDS` (plus the module's :attr:`tenant_kinds`) in
        ``namespace``: deleting it would delete theirs."""
        selector = f"{MODULE_LABEL},{MODULE_LABEL}!={self.module}"
        found: set[str] = set()
        kinds = (*TENANT_KINDS, *self.tenant_kinds)
        for api_version, kind in dict.fromkeys(parse_kind(k) for k in kinds):
            try:
                items = self._resource(api_version, kind).get(namespace=namespace, label_selector=selector).items
            except (NotFoundError, ResourceNotFoundError, ApiException):  # kind not served: nothing of it
                continue
            found |= {(i.metadata.labels or {}).get(MODULE_LABEL, "") for i in items}
        return sorted(found - {""})

    def _has_pvcs(self, namespace: str) -> bool:
        return bool(client.CoreV1Api(self.dyn.client).list_namespaced_persistent_volume_claim(namespace).items)

    def _wait_gone(self, objects: list[Obj], timeout: int) -> None:
        deadline = time.monotonic() + timeout
        remaining = list(objects)
        for delay in backoff(limit=1.0):
            remaining = [o for o in remaining
                         if self._get(self._resource(o["apiVersion"], o["kind"]), o) is not None]
            if not remaining or time.monotonic() > deadline:
                break
            time.sleep(delay)
        if remaining:
            raise TimeoutError(f"still present after {timeout}s: {', '.join(ident(o) for o in remaining)}")
