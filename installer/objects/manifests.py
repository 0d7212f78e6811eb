"""Apply a module's objects: decide what to do with each (installer.objects.planning), then do it, a stage at a
time (:class:`Manifests`): server-side apply in dependency order, with the module's labels and the digest of what was
applied, leaving what nobody wrote to since.

Every object a module applies carries ``installer.kubesphere.io/module=<module>`` and
``app.kubernetes.io/managed-by=ks-installer``, and each run records what it applied (and what its generator tasks
made) in the run's inventory (installer.objects.inventory), which the engine keeps as the module's recorded
inventory. What an apply does to objects that exist not as the module made them is in installer.objects.repair;
prune in installer.objects.pruning; uninstall and ``state: absent`` in installer.objects.removal; readiness and its
wait in installer.objects.readiness; the preview of the same decisions in installer.preview.foresight.

An object is applied only when it may differ from its manifest: each carries ``installer.kubesphere.io/applied``,
the digest of the manifest applied last, and one that has the same digest, no other writer's field where the render
or the deny-list decides, and (recorded in the module's facts) the UID and the installer's own fields' values its last
write left is left as it is (installer.objects.planning.unchanged_since_applied).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError, ResourceNotFoundError

from installer.objects.api_errors import Rejected, api_reason
from installer.objects.change_set import Decision, Foreseen
from installer.objects.inventory import METADATA_LISTED, facts_of, object_key, read_recorded_facts
from installer.objects.originals import Key
from installer.objects.ownership import run_namespaces, run_tenant_kinds
from installer.objects.planning import (
    Planning,
    as_applied,
    digest,
    labelled,
    opted_out,
    unchanged_since_applied,
)
from installer.objects.pruning import Pruning
from installer.objects.readiness import WORKLOAD_KINDS, backends, backoff, established, wait_ready, wait_serving
from installer.objects.refs import LATE_KINDS, Obj, ident, ref_of, stage
from installer.objects.repair import RECREATE_TIMEOUT, Repairs, planted_note
from installer.objects.results import ApplyResult, Change
from installer.settings import FIELD_MANAGER, MODULE_LABEL

__all__ = ["Manifests", "as_applied", "digest", "labelled", "opted_out", "unchanged_since_applied"]

#: How long a run waits for an object it applies that is being deleted to be gone.
TERMINATING_TIMEOUT = 180
#: The apply stages (installer.objects.refs.stage): namespaces and CRDs, the rest, then webhooks, APIServices and
#: custom resources; each is planned once the one before it is done.
STAGES = (0, 1, 2)
#: How long an apply waits for the Services it renders behind the webhooks and APIServices it writes to have a ready
#: endpoint (then it writes them anyway, with a warning: as the original installer did).
BACKEND_TIMEOUT = 120
#: The decisions that write an object.
WRITES = ("create", "update", "adopt", "recreate")


class Manifests(Planning, Repairs, Pruning):
    """A module's objects on the cluster: :meth:`plan` decides what to do with each (reading only), :meth:`execute`
    does it; :meth:`apply` does both, one stage at a time. installer.preview.foresight.Foresight shows the same
    decisions without writing."""

    foreseen: Foreseen | None = None
    _facts: dict[str, list[str]] | None = None

    def __init__(self, api: client.ApiClient, module: str, facts: dict[str, list[str]] | None = None,
                 namespaces: Iterable[str] | None = None, tenant_kinds: Iterable[str] | None = None) -> None:
        """``namespaces`` and ``tenant_kinds``: the module's (its registry entry); by default as its run got them."""
        self.dyn = DynamicClient(api)
        self.module = module
        self.namespaces = frozenset(namespaces) if namespaces is not None else run_namespaces()
        self.tenant_kinds = tuple(tenant_kinds) if tenant_kinds is not None else run_tenant_kinds()
        self.gone: set[str] = set()
        """What a preview's deletes removed (an apply creates it again); a run's deletes are done, not foreseen."""
        self._cc_created: str | None = None
        self._released: dict[str, set[Key]] = {}  # per namespace: what the Helm releases left there name
        self._facts = facts
        """The module's recorded facts (UIDs it owns); None: read from the run's recorded inventory file."""

    @property
    def facts(self) -> dict[str, list[str]]:
        if self._facts is None:
            self._facts = read_recorded_facts()
        return self._facts

    def _preview(self, result: ApplyResult, change: Change) -> None:
        """Where a preview (installer.preview.foresight) collects what the run would do; a run shows nothing."""

    def _resource(self, api_version: str, kind: str) -> Any:
        return self.dyn.resources.get(api_version=api_version, kind=kind)

    def _claim(self, res: Any, obj: Obj) -> Any:
        """Create an absent namespace labelled as this module's, and return it; when another module created it
        meanwhile (modules run in parallel), return that one: the first to create it owns it, and only it records
        it (an apply alone would let the last writer take the label from a module that recorded it)."""
        try:
            return res.create(body=labelled(obj, self.module), field_manager=FIELD_MANAGER)
        except ApiException as exc:
            if exc.status != 409:
                raise Rejected(f"creating {ident(obj)}: {api_reason(exc)}") from exc
            return self._get(res, obj)

    def _get(self, res: Any, obj: Obj) -> Any:
        try:
            return res.get(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
        except NotFoundError:
            return None

    def apply(self, objects: list[Obj]) -> ApplyResult:
        """Server-side apply ``objects``, one stage at a time (:data:`STAGES`): each stage's decisions
        (:meth:`plan`) are made once the stage before is done, and carried out (:meth:`execute`). What the module no
        longer makes is pruned after its run, from its inventory (:meth:`prune_inventory`). The workloads of
        ``objects`` that run as a ServiceAccount made anew are restarted."""
        result = ApplyResult()
        renewed: set[tuple[str, str]] = set()  # ServiceAccounts this apply deleted and made again
        existed: set[str] = set()  # workloads there before this apply (whose pods may hold a renewed one's token)
        for level in STAGES:
            staged = [o for o in objects if stage(o["apiVersion"], o["kind"]) == level]
            if staged:
                decisions = self.plan(staged)
                self._wait_backends(decisions, objects, result)
                self.execute(decisions, result, renewed, existed)
        if renewed:
            self._restart_users([o for o in objects if ident(o) in existed], renewed, result)
        return result

    def _wait_backends(self, decisions: list[Decision], objects: list[Obj], result: ApplyResult) -> None:
        """Before writing webhooks and APIServices, wait until the Services they call that this apply renders (their
        workloads were applied in the stage before) have a ready endpoint: registered earlier, a webhook with
        failurePolicy Fail refuses every write it intercepts, and an APIService makes discovery fail, until then. A
        Service the apply does not render (another module's, or none) is not waited for."""
        rendered = {(o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in objects
                    if o["kind"] == "Service"}
        services = {s: d.ref for d in decisions if d.action in WRITES and d.obj["kind"] in LATE_KINDS
                    for s in backends(d.obj) if s in rendered}
        for ns, name in wait_serving(self.dyn, list(services), BACKEND_TIMEOUT) if services else ():
            result.foreign.append(f"{services[(ns, name)]}: written although Service {ns}/{name} had no ready "
                                  f"endpoint after {BACKEND_TIMEOUT}s")

    def execute(self, decisions: list[Decision], result: ApplyResult, renewed: set[tuple[str, str]],
                existed: set[str]) -> None:
        """Carry out ``decisions`` (one stage's, in order) into ``result``; new or changed CRDs are waited for
        (Established and served) before the next kind. ``renewed`` collects the ServiceAccounts made anew,
        ``existed`` the workloads that were there."""
        unestablished: list[str] = []  # new or changed CRDs, waited for together before the next kind
        for d in decisions:
            obj = d.obj
            if obj["kind"] != "CustomResourceDefinition":
                self._wait_established(unestablished)
            metadata_only = obj["kind"] in METADATA_LISTED
            if d.live is not None and obj["kind"] in WORKLOAD_KINDS:
                existed.add(d.ref)
            result.actions.setdefault(d.ref, d.action)
            if d.action == "kept" and not d.adopt:
                result.kept.append(f"{d.ref} ({d.note})")
                continue
            if d.action in ("kept", "unchanged"):
                result.applied.append(d.ref)  # as applied last and nobody wrote to it since, or left to its users
                if d.adopt and d.live is not None:
                    result.applied_refs.append(ref_of(obj))
                    result.facts[object_key(ref_of(obj))] = facts_of(d.live, metadata_only)
                if d.action == "kept":
                    result.foreign.append(f"{d.ref}: left as it is ({d.note})")
                continue
            res = self._await_served(obj["apiVersion"], obj["kind"])
            try:
                after = self._write(res, d, result, renewed)
            except ApiException as exc:
                raise Rejected(f"applying {d.ref}: {api_reason(exc)}") from exc
            if after is None:
                result.actions[d.ref] = "kept"
                continue
            result.applied.append(d.ref)
            if d.adopt:
                result.applied_refs.append(ref_of(obj))
                result.facts[object_key(ref_of(obj))] = facts_of(after, metadata_only)
            before = d.live["metadata"].get("resourceVersion") if d.live and d.action != "recreate" else None
            changed = before != after["metadata"]["resourceVersion"]
            if changed:
                result.changed.append(d.ref)
            if obj["kind"] == "CustomResourceDefinition" and (changed or not established(after)):
                unestablished.append(obj["metadata"]["name"])
        self._wait_established(unestablished)

    def _write(self, res: Any, d: Decision, result: ApplyResult, renewed: set[tuple[str, str]]) -> Obj | None:
        """Write one object as decided; returns it as the API server returned it (None: a namespace another module
        created meanwhile, left to it)."""
        obj, body = d.obj, d.body
        meta = obj["metadata"]
        if d.action == "recreate" and d.renew:
            self._renew(res, d, result)
            if obj["kind"] == "ServiceAccount":
                renewed.add((meta.get("namespace") or "", meta["name"]))
        elif d.action == "recreate":
            self._wait_terminating(d)
        if obj["kind"] == "Namespace" and (d.live is None or d.action == "recreate"):
            owner = (self._claim(res, obj).metadata.labels or {}).get(MODULE_LABEL)
            if owner and owner != self.module:
                result.kept.append(f"{d.ref} (belongs to module {owner})")
                return None
        if d.action == "adopt":
            assert d.live is not None
            after = self._take_over(res, obj, body, d.live["metadata"], result)
        else:
            after = self._apply_or_replace(res, obj, body, result)
        return self._evict_foreign(res, obj, body, after, result)

    def _renew(self, res: Any, d: Decision, result: ApplyResult) -> None:
        """Delete an object the module did not make (the UID it was decided on, as a precondition), so that the
        apply creates it anew; wait until it is gone."""
        meta = d.obj["metadata"]
        uid = (d.live or {}).get("metadata", {}).get("uid")
        with contextlib.suppress(NotFoundError, ConflictError):
            res.delete(name=meta["name"], namespace=meta.get("namespace"),
                       body={"preconditions": {"uid": uid}} if uid else {})
        self._wait_gone([d.obj], RECREATE_TIMEOUT)
        result.foreign.append(f"{d.ref}: {planted_note(d.obj['kind'], self.module)}")

    def _wait_terminating(self, d: Decision) -> None:
        """Wait until an object being deleted (an earlier uninstall, or someone, deleted it and a finalizer holds it,
        as a PVC's while a pod still mounts it) is gone, so that the apply creates it anew; fail naming its
        finalizers when it stays."""
        finalizers = ", ".join((d.live or {}).get("metadata", {}).get("finalizers") or []) or "none"
        try:
            self._wait_gone([d.obj], TERMINATING_TIMEOUT)
        except TimeoutError as exc:
            raise Rejected(f"{d.ref} is being deleted and is still there after {TERMINATING_TIMEOUT}s (finalizers: "
                           f"{finalizers}); it is applied again once it is gone") from exc

    def _server_side_apply(self, res: Any, body: Obj) -> Obj:
        meta = body["metadata"]
        return json.loads(res.server_side_apply(body=body, name=meta["name"], namespace=meta.get("namespace"),
                                                field_manager=FIELD_MANAGER, force_conflicts=True,
                                                serialize=False).data)

    def _wait_established(self, names: list[str], timeout: float = 60) -> None:
        """Wait until every CRD in ``names`` is Established and discovery serves its kind (the API server
        publishes it a moment after Established, later on a busy machine); empties ``names``."""
        if not names:
            return
        ext = client.ApiextensionsV1Api(self.dyn.client)
        deadline = time.monotonic() + timeout
        kinds: set[tuple[str, str]] = set()
        for delay in backoff():
            crds = [ext.read_custom_resource_definition(n) for n in names]
            names[:] = [c.metadata.name for c in crds if not any(
                cond.type == "Established" and cond.status == "True" for cond in c.status.conditions or [])]
            kinds |= {(f"{c.spec.group}/{v.name}", c.spec.names.kind) for c in crds for v in c.spec.versions
                      if v.served}
            if not names:
                kinds = {k for k in kinds if not self._discovered(*k)}
                if not kinds:
                    return
            if time.monotonic() > deadline:
                waited = names or [f"{v}/{k}" for v, k in sorted(kinds)]
                raise TimeoutError(f"CustomResourceDefinition {', '.join(waited)} not served after {timeout}s")
            time.sleep(delay)

    def _await_served(self, api_version: str, kind: str, timeout: float = 30) -> Any:
        """The API resource of a kind, waiting a while for discovery to serve it: a CRD that Helm or another
        module created a moment ago is published after it is Established."""
        deadline = time.monotonic() + timeout
        for delay in backoff():
            try:
                return self._resource(api_version, kind)
            except ResourceNotFoundError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(delay)

    def _discovered(self, api_version: str, kind: str) -> bool:
        """Whether discovery serves the kind (a miss reads discovery again)."""
        try:
            self._resource(api_version, kind)
        except ResourceNotFoundError:
            return False
        return True

    def wait_ready(self, objects: list[Obj], timeout: int = 600) -> None:
        """Wait until the objects among ``objects`` that have a readiness (see :data:`WAITED_KINDS`) are ready."""
        wait_ready(self.dyn, objects, timeout)
