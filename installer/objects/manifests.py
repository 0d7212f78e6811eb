"""Apply a module's objects: server-side apply in dependency order, with the module's labels and the digest of
what was applied, skipping what nobody wrote to since (:class:`Manifests`).

Every object a module applies carries ``installer.kubesphere.io/module=<module>`` and
``app.kubernetes.io/managed-by=ks-installer``, and each run records what it applied (and what its generator tasks
made) in the run's inventory (installer.objects.inventory), which the engine keeps as the module's recorded
inventory. What an apply does to objects that exist not as the module made them is in installer.objects.repair;
prune, uninstall and ``state: absent`` in installer.objects.removal; readiness and its wait in
installer.objects.readiness; the change set a dry run returns in installer.objects.results.

An object is applied only when it may differ from its manifest: each carries ``installer.kubesphere.io/applied``,
the digest of the manifest applied last, and one that has the same digest, no other writer's field where the render
or the deny-list decides, and (recorded in the module's facts) the UID and the installer's own fields' values its last
write left is left as it is (:func:`unchanged_since_applied`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.objects.api_errors import Rejected, api_reason
from installer.objects.field_takeover import legacy_entries
from installer.objects.foreign import clean
from installer.objects.inventory import METADATA_LISTED, facts_of, object_key, read_recorded_facts
from installer.objects.originals import Key
from installer.objects.readiness import WORKLOAD_KINDS, backoff, established, wait_ready
from installer.objects.refs import PARTIAL_METADATA_LIST, Obj, ident, rank, ref_of
from installer.objects.removal import Removal
from installer.objects.repair import RECREATED_KINDS, Repairs, foreign_removed
from installer.objects.results import ApplyResult, Change
from installer.settings import (
    APPLIED_ANNOTATION,
    FIELD_MANAGER,
    MANAGED_BY,
    MODULE_LABEL,
    SSA_ANNOTATION,
    SSA_OPT_OUTS,
)


def opted_out(meta: Obj | None) -> bool:
    """Whether a user set :data:`SSA_ANNOTATION` on the object to keep the installer from writing it."""
    return (((meta or {}).get("annotations") or {}).get(SSA_ANNOTATION) in SSA_OPT_OUTS)


#: How long a run waits for an object it applies that is being deleted to be gone.
TERMINATING_TIMEOUT = 180


def digest(body: Obj) -> str:
    """The digest of a manifest (canonical JSON) that ``installer.kubesphere.io/applied`` records."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def labelled(obj: Obj, module: str, adopt: bool = True) -> Obj:
    """A copy of ``obj`` with the installer's labels (``adopt``: the module's too)."""
    body = copy.deepcopy(obj)
    labels = body["metadata"].setdefault("labels", {})
    labels.update(MANAGED_BY)
    if adopt:
        labels[MODULE_LABEL] = module
    return body


def as_applied(obj: Obj, module: str, adopt: bool = True) -> Obj:
    """``obj`` as the installer applies it: :func:`labelled`, with the digest of that manifest in
    ``installer.kubesphere.io/applied``."""
    body = labelled(obj, module, adopt)
    body["metadata"].setdefault("annotations", {})[APPLIED_ANNOTATION] = digest(body)
    return body


def unchanged_since_applied(live: Obj, manifest_digest: str, body: Obj, recorded: list[str] | None = None,
                            metadata_only: bool = False) -> bool:
    """Whether a live object is still what the installer applied of a manifest (``body``, whose digest is
    ``manifest_digest``), from what the API server wrote, never from names or times: the annotation matches, no
    other writer owns a field the render sets or denied content (installer.objects.foreign), and, when the module's
    record has the object (``recorded``: [UID, guard]), it is the same object (UID) and the installer's fields on
    it hold what its last write left (guard): a write under the installer's own name shows there."""
    meta = live["metadata"]
    if (meta.get("annotations") or {}).get(APPLIED_ANNOTATION) != manifest_digest:
        return False
    if not clean(body["kind"], meta.get("managedFields") or [], body):
        return False
    return recorded is None or facts_of(live, metadata_only) == list(recorded)


@dataclass
class DryRun:
    """What a dry run takes as done although the cluster does not have it yet: the kinds (``apiVersion/Kind``) whose
    CRDs the previewed runs create, and the namespaces earlier dry runs create (filled as they go)."""

    kinds: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)


class Manifests(Repairs, Removal):
    """A module's objects on the cluster. With ``dry_run`` nothing is written: every apply is a server-side dry run
    (``dryRun=All``), deletes and waits only look, and each result's :attr:`ApplyResult.changes` says what the run
    would do to each object; what cannot be dry-run (the takeover of the original installer's object, a recreate)
    is foreseen from the same decisions."""

    dry_run: DryRun | None = None
    _facts: dict[str, list[str]] | None = None
    _gone: frozenset[str] = frozenset()
    """What this dry run's deletes removed (an apply creates it again)."""

    def __init__(self, api: client.ApiClient, module: str, dry_run: DryRun | None = None,
                 facts: dict[str, list[str]] | None = None) -> None:
        self.dyn = DynamicClient(api)
        self.module = module
        self.dry_run = dry_run
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
        """Add ``change`` to a dry run's change set."""
        if self.dry_run is not None:
            result.changes.append(change)

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
        """Server-side apply ``objects`` in dependency order (what the module no longer makes is pruned after its
        run, from its inventory: :meth:`prune_inventory`).

        What existed before comes from one metadata-only list per kind of the module's labelled objects (a
        Namespace, which may belong to someone else, is read on its own), so an apply costs one request per
        object plus one per kind. A dry run's result lists in ``changes`` what the run does to each object
        (created, updated, unchanged, adopted, recreated, kept, refused).
        """
        result = ApplyResult()
        versions: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        recorded = self.facts
        unestablished: list[str] = []  # new or changed CRDs, waited for together before the next kind
        renewed: set[tuple[str, str]] = set()  # ServiceAccounts this apply deleted and made again
        existed: set[str] = set()  # workloads there before this apply (whose pods may hold a renewed one's token)
        for obj in sorted(objects, key=lambda o: rank(o["kind"])):
            if obj["kind"] != "CustomResourceDefinition":
                self._wait_established(unestablished)
            res = self._served(obj, result)
            if res is None:
                continue  # a dry run's object of a kind not served (yet)
            meta = obj["metadata"]
            live_meta: Obj | None
            live_obj: Obj | None = None
            if obj["kind"] == "Namespace":
                live = self._get(res, obj)
                if live is not None and self._terminating(obj, live.to_dict()["metadata"], result):
                    live = None
                if live is None and self.dry_run is not None:
                    self.dry_run.namespaces.add(meta["name"])  # created by the run: its objects cannot be dry-run
                elif live is None:
                    live = self._claim(res, obj)
                live_obj = live.to_dict() if live is not None else None
                live_meta = live_obj["metadata"] if live_obj is not None else None
                owner = (live_meta.get("labels") or {}).get(MODULE_LABEL) if live_meta is not None else None
                # Never adopt a namespace someone else created: it must survive this module's uninstall.
                adopt = live is None or owner == self.module
            else:
                key = (obj["apiVersion"], obj["kind"])
                if key not in versions:
                    versions[key] = self._versions(res)
                live_obj = versions[key].get((meta.get("namespace") or "", meta["name"]))
                live_meta = live_obj["metadata"] if live_obj is not None else None
                if live_meta is not None and self._terminating(obj, live_meta, result):
                    if self.dry_run is not None:
                        result.applied.append(ident(obj))  # foreseen as created again: not pruned
                        continue
                    live_obj = live_meta = None
                owner, adopt = None, True
                if live_obj is not None and obj["kind"] in WORKLOAD_KINDS:
                    existed.add(ident(obj))
            if not adopt and owner:
                # Another module's namespace: applying it under the shared field manager would take that
                # module's fields (its label included) away. It exists; leave it to its owner.
                result.kept.append(f"{ident(obj)} (belongs to module {owner})")
                continue
            before = live_meta.get("resourceVersion") if live_meta is not None else None
            body = as_applied(obj, self.module, adopt)
            manifest_digest = body["metadata"]["annotations"][APPLIED_ANNOTATION]
            if self._gone and ident(obj) in self._gone:  # a dry run's: deleted by the run before, so created again
                self._preview(result, Change(ident(obj), "recreate", note="deleted and applied again by the run",
                                             body=body))
                continue
            metadata_only = obj["kind"] in METADATA_LISTED
            known = recorded.get(object_key(ref_of(obj)))
            if live_obj is not None and opted_out(live_meta):
                result.applied.append(ident(obj))  # left to its users; still the module's
                if adopt:
                    result.applied_refs.append(ref_of(obj))
                    result.facts[object_key(ref_of(obj))] = facts_of(live_obj, metadata_only)
                result.foreign.append(f"{ident(obj)}: left as it is ({SSA_ANNOTATION}: "
                                      f"{(live_meta.get('annotations') or {})[SSA_ANNOTATION]})")
                self._preview(result, Change(ident(obj), "kept", note=f"{SSA_ANNOTATION} set on it", body=body))
                continue
            if live_obj is not None and unchanged_since_applied(live_obj, manifest_digest, body, known, metadata_only):
                result.applied.append(ident(obj))  # as applied last, and nobody wrote to it since
                if adopt:
                    result.applied_refs.append(ref_of(obj))
                    result.facts[object_key(ref_of(obj))] = facts_of(live_obj, metadata_only)
                self._preview(result, Change(ident(obj), "unchanged", body=body))
                continue
            try:
                current = self._get(res, obj) if self.dry_run is not None else None  # what the preview compares
                if obj["kind"] in RECREATED_KINDS and self._recreate_planted(res, obj, body, result, known,
                                                                             bool(recorded)):
                    if self.dry_run is not None:
                        continue
                    if obj["kind"] == "ServiceAccount":
                        renewed.add((meta.get("namespace") or "", meta["name"]))
                after = self._apply_one(res, obj, body, before is None and adopt, result, current)
                if after is None:
                    continue  # a dry run's takeover or recreate: foreseen, in result.changes
                after = self._evict_foreign(res, obj, body, after, result)
            except ApiException as exc:
                if self.dry_run is None:
                    raise Rejected(f"applying {ident(obj)}: {api_reason(exc)}") from exc
                self._preview(result, self._refused(obj, body, exc))
                continue
            result.applied.append(ident(obj))
            if adopt:
                result.applied_refs.append(ref_of(obj))
            if self.dry_run is not None:
                live = current.to_dict() if current is not None else None
                self._preview(result, Change(ident(obj), "create" if live is None else "update",
                                             [] if live is None else foreign_removed(obj, after, body),
                                             body=body, live=live, after=after))
                continue
            if adopt:
                result.facts[object_key(ref_of(obj))] = facts_of(after, metadata_only)
            changed = before != after["metadata"]["resourceVersion"]
            if changed:
                result.changed.append(ident(obj))
            if obj["kind"] == "CustomResourceDefinition" and (changed or not established(after)):
                unestablished.append(meta["name"])
        self._wait_established(unestablished)
        if renewed:
            self._restart_users([o for o in objects if ident(o) in existed], renewed, result)
        return result

    def create_missing(self, objects: list[Obj]) -> ApplyResult:
        """Apply those of ``objects`` that do not exist; leave the others as they are (what was changed in them
        since stays). Those of them that are this module's (its label) stay in the run's inventory, so no prune
        deletes them: objects a module makes once and then leaves to their users (upstream's Helm pre-install
        hooks, objects it created only when absent)."""
        live = {ref_of(o): self.live_labels(o) for o in objects}
        result = self.apply([o for o in objects if live[ref_of(o)] is None])
        result.applied_refs += [r for r, labels in live.items() if (labels or {}).get(MODULE_LABEL) == self.module]
        return result

    def live_labels(self, obj: Obj) -> dict[str, str] | None:
        """The labels of ``obj`` as it exists (None: it does not)."""
        try:
            live = self._get(self._resource(obj["apiVersion"], obj["kind"]), obj)
        except ResourceNotFoundError:  # its CRD is not served yet: nothing of it exists
            return None
        return None if live is None else dict(live.metadata.labels or {})

    def _terminating(self, obj: Obj, live_meta: Obj, result: ApplyResult) -> bool:
        """Whether ``obj`` is being deleted (an earlier uninstall, or someone, deleted it and a finalizer holds it, as
        a PVC's while a pod still mounts it). An apply would only update the object that is going away; a run waits
        until it is gone, to create it anew, and fails naming its finalizers when it stays; a dry run foresees it.
        For a Namespace of a dry run, the caller goes on as if it were absent."""
        if not live_meta.get("deletionTimestamp"):
            return False
        finalizers = ", ".join(live_meta.get("finalizers") or []) or "none"
        if self.dry_run is not None:
            if obj["kind"] != "Namespace":
                self._preview(result, Change(ident(obj), "recreate", note="being deleted: created again once gone",
                                             body=as_applied(obj, self.module)))
            return True
        timeout = TERMINATING_TIMEOUT
        try:
            self._wait_gone([obj], timeout)
        except TimeoutError as exc:
            raise Rejected(f"{ident(obj)} is being deleted and is still there after {timeout}s (finalizers: "
                           f"{finalizers}); it is applied again once it is gone") from exc
        return True

    def _served(self, obj: Obj, result: ApplyResult) -> Any:
        """The API resource of ``obj``'s kind; for a dry run, None when it is not served (a change says whether the
        run's CRD serves it by then or it is an error)."""
        if self.dry_run is None:
            return self._await_served(obj["apiVersion"], obj["kind"])
        try:
            return self._resource(obj["apiVersion"], obj["kind"])
        except Exception:
            pass
        kind = f"{obj['apiVersion']}/{obj['kind']}"
        assert self.dry_run is not None
        if kind in self.dry_run.kinds:
            self._preview(result, Change(ident(obj), "create", note="its CustomResourceDefinition is created first",
                                         body=as_applied(obj, self.module)))
        else:
            self._preview(result, Change(ident(obj), "error", note=f"kind {kind} is not served"))
        return None

    def _refused(self, obj: Obj, body: Obj, exc: ApiException) -> Change:
        """A dry run's change for an apply the API server refused: an object in a namespace the run creates first
        cannot be dry-run before it exists (created); anything else is an error, the server's reason."""
        namespace = obj["metadata"].get("namespace")
        if exc.status == 404 and self.dry_run is not None and namespace in self.dry_run.namespaces:
            return Change(ident(obj), "create", note=f"namespace {namespace} is created first", body=body)
        return Change(ident(obj), "error", note=api_reason(exc), body=body)

    def _apply_one(self, res: Any, obj: Obj, body: Obj, maybe_adopted: bool, result: ApplyResult,
                   current: Any = None) -> Obj | None:
        """Server-side apply one object (``maybe_adopted``: it may be the original installer's, not yet labelled);
        returns it as applied (a dry run: as it would be; None when the takeover or a recreate was foreseen instead,
        ``current`` being the object as it is).

        An object the original installer made (kubectl, Helm) has its fields taken over (installer.engine.adoption) and
        is applied again, which removes those the installer no longer sets, so the result is the render, not a merge
        of both. When the first apply is refused (422: the render merged with the original's fields is invalid,
        like an env entry with both ``value`` and ``valueFrom``), the takeover comes first. A field the API server
        will not change (a selector, a headless Service's clusterIP, a Job's template) is handled by
        :meth:`_replace`.

        A workload the original made has its fields taken over before the first apply: applying over them first
        would change its pod template twice (the render merged with the original's fields, then the render),
        rolling its pods twice (a dry run foresees the same takeover from its own apply, below)."""
        refused: ApiException | None = None
        after: Obj | None = None
        if (maybe_adopted and self.dry_run is None and obj["kind"] in WORKLOAD_KINDS
                and (live := self._get(res, obj)) is not None):
            live_meta = live.to_dict()["metadata"]
            if legacy_entries(live_meta):
                return self._take_over(res, obj, body, live_meta, result)
        try:
            after = self._server_side_apply(res, body)
        except ApiException as exc:
            if exc.status != 422:
                raise
            refused = exc
            if maybe_adopted and (live := current or self._get(res, obj)) is not None:
                after = live.to_dict()
        if maybe_adopted and after is not None and legacy_entries(after["metadata"]):
            if self.dry_run is not None:
                return self._foresee_takeover(res, obj, body, current.to_dict() if current else after, after,
                                              refused, result)
            return self._take_over(res, obj, body, after["metadata"], result)
        if refused is None:
            assert after is not None
            return after
        return self._replace(res, obj, body, refused, result)

    def _server_side_apply(self, res: Any, body: Obj) -> Obj:
        meta = body["metadata"]
        dry = {"dry_run": "All"} if self.dry_run is not None else {}
        return json.loads(res.server_side_apply(body=body, name=meta["name"], namespace=meta.get("namespace"),
                                                field_manager=FIELD_MANAGER, force_conflicts=True,
                                                serialize=False, **dry).data)

    def _versions(self, res: Any) -> dict[tuple[str, str], Obj]:
        """``(namespace, name)`` → this module's objects of one kind as they are (one list; of the kinds in
        :data:`METADATA_LISTED`, their metadata only)."""
        header = {"Accept": PARTIAL_METADATA_LIST} if res.kind in METADATA_LISTED else {}
        try:
            raw = res.get(label_selector=f"{MODULE_LABEL}={self.module}", serialize=False, header_params=header)
        except (NotFoundError, ResourceNotFoundError):
            return {}
        return {(i["metadata"].get("namespace") or "", i["metadata"]["name"]): i
                for i in json.loads(raw.data).get("items") or []}

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
