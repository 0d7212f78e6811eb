"""Apply and remove a module's objects: server-side apply, inventory, prune, staged delete.

Every object a module applies carries ``installer.kubesphere.io/module=<module>`` and
``app.kubernetes.io/managed-by=ks-installer``, and each run records what it applied (and what its generator tasks
made) in the run's inventory, which the engine keeps as the module's recorded inventory. The prune after a
successful run deletes what the recorded inventory has and the run's lacks (:func:`stale_refs`,
:meth:`Manifests.prune_inventory`); an uninstall deletes the recorded inventory, the last apply stage first
(:func:`stage`). Both delete only objects that still carry the module's label, through one deletion policy
(:meth:`Manifests._remove`): namespaces that existed before are never adopted, so never deleted; PVCs and CRDs are
kept unless ``purge`` is set, and a namespace that still holds PVCs is kept with them.

An object is applied only when it may differ from its manifest: each carries ``installer.kubesphere.io/applied``,
the digest of the manifest applied last, and one that has the same digest and that no other field manager wrote
to since (a write to one of the installer's fields moves the field to that manager and stamps its entry later)
is left as it is. The metadata-only list of the module's objects that an apply reads anyway tells both.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError, ResourceNotFoundError
from kubernetes.dynamic.resource import ResourceList

from installer import yaml_c
from installer.objects.field_takeover import dropped_by_takeover, legacy_entries, now_rfc3339, take_over
from installer.objects.foreign import clean, eviction, guard
from installer.objects.originals import Key, helm_records, named_by_original, release_objects
from installer.objects.ownership import why_spared
from installer.settings import (
    APPLIED_ANNOTATION,
    CC_GROUP,
    CC_KIND,
    CC_NAME,
    CC_VERSION,
    FIELD_MANAGER,
    MANAGED_BY,
    MODULE_LABEL,
    NAMESPACE,
    SSA_ANNOTATION,
    SSA_OPT_OUTS,
)

Obj = dict[str, Any]
Ref = tuple[str, str, str, str]
"""(apiVersion, kind, namespace or "", name)."""
INVENTORY_ENV = "KS_INVENTORY_FILE"
RECORDED_ENV = "KS_RECORDED_INVENTORY"
"""A JSON file holding the module's recorded inventory (its last successful run's, with what failed runs since
applied), set by the engine when the record has one: what an uninstall deletes and a prune compares with."""
PURGE_ENV = "KS_PURGE"
"""Set to ``1`` by the engine for an uninstall that purges: every ``state: absent`` of the run purges."""

#: Apply order; uninstall runs it backwards. Kinds not listed go after the listed ones.
KIND_ORDER = (
    "Namespace", "CustomResourceDefinition", "PriorityClass", "StorageClass", "ServiceAccount", "ClusterRole",
    "ClusterRoleBinding", "Role", "RoleBinding", "Secret", "ConfigMap", "PersistentVolumeClaim", "Service",
    "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob",
)
KEPT_ON_UNINSTALL = ("PersistentVolumeClaim", "CustomResourceDefinition")
#: Kinds a purge looks at even when the uninstall does not name them (roles keep them out of it otherwise).
PURGED_KINDS = ("v1/PersistentVolumeClaim", "v1/Secret")
#: Kinds whose objects of another module keep a namespace from being deleted (``delete(tenants=...)`` adds more).
#: Kinds an apply lists by their metadata only (their specs are large); their guard covers which fields the
#: installer owns, not their values.
METADATA_LISTED = ("CustomResourceDefinition",)
#: The Accept header of a list that returns only the objects' metadata.
PARTIAL_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
TENANT_KINDS = ("v1/ConfigMap", "v1/Secret", "v1/Service", "v1/ServiceAccount", "apps/v1/Deployment",
                "apps/v1/StatefulSet", "apps/v1/DaemonSet", "batch/v1/Job", "batch/v1/CronJob")


#: Kinds never deleted to change a field that cannot change (a PVC is kept as it is and reported; the rest fail).
NEVER_RECREATED = ("PersistentVolumeClaim", "PersistentVolume", "Namespace", "CustomResourceDefinition")
#: Kinds deleted with ``propagationPolicy: Orphan`` when they are recreated: their pods stay for the new object.
ORPHANED_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
#: How long a recreate waits for the deleted object to be gone (an orphaning delete waits for the garbage collector).
RECREATE_TIMEOUT = 120
#: What the API server's validation says of a field that cannot change (apimachinery's ValidateImmutableField, a
#: Service's clusterIP, a StatefulSet's spec, a bound PVC's spec).
IMMUTABLE_MESSAGES = ("field is immutable", "may not change once set", "updates to statefulset spec for fields other",
                      "spec is immutable after creation")


def immutable_fields(exc: ApiException) -> list[str]:
    """The fields a refused write names as unchangeable, when every cause of the refusal is one (else ``[]``)."""
    if exc.status != 422:
        return []
    try:
        causes = (json.loads(exc.body or "{}").get("details") or {}).get("causes") or []
    except (ValueError, AttributeError):
        return []
    fields = [c.get("field") or "?" for c in causes if any(m in (c.get("message") or "") for m in IMMUTABLE_MESSAGES)]
    return list(dict.fromkeys(fields)) if causes and len(fields) == len(causes) else []


def _rank(kind: str) -> int:
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def _uninstall_order(obj: Obj) -> tuple[int, int, int]:
    """Deletion order: the last apply stage first (webhooks and APIServices before custom resources), then kinds
    backwards."""
    late = obj["kind"] in LATE_KINDS
    return -stage(obj["apiVersion"], obj["kind"]), 0 if late else 1, -_rank(obj["kind"])


def ident(obj: Obj) -> str:
    ns = obj["metadata"].get("namespace")
    return f"{obj['kind']}/{ns + '/' if ns else ''}{obj['metadata']['name']}"


def ref_of(obj: Obj) -> Ref:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"]


def parse_kind(ref: str) -> tuple[str, str]:
    """``"apps/v1/Deployment"`` → ``("apps/v1", "Deployment")``; ``"v1/Service"`` → ``("v1", "Service")``."""
    api_version, _, kind = ref.rpartition("/")
    if not api_version or not kind:
        raise ValueError(f"expected <apiVersion>/<Kind>, got {ref!r}")
    return api_version, kind


def _kinds(objects: list[Obj], extra: Iterable[str]) -> set[tuple[str, str]]:
    return {(o["apiVersion"], o["kind"]) for o in objects} | {parse_kind(k) for k in extra}


#: Kinds of the last apply stage (with custom resources): they need the workloads serving them, and an uninstall
#: deletes them first, waiting until they are gone, while the operators that hold their finalizers still run.
LATE_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService")
#: API groups of Kubernetes itself (besides those ending in ``.k8s.io``): their kinds are not custom resources.
BUILTIN_GROUPS = ("", "apps", "batch", "policy", "autoscaling")


def stage(api_version: str, kind: str) -> int:
    """The apply stage of a kind: 0 Namespaces and CRDs, 1 the rest, 2 webhooks, APIServices and custom
    resources. An uninstall runs the stages backwards."""
    if kind in ("Namespace", "CustomResourceDefinition"):
        return 0
    group = api_version.rpartition("/")[0]
    if kind in LATE_KINDS or not (group in BUILTIN_GROUPS or group.endswith(".k8s.io")):
        return 2
    return 1


def group_key(ref: Ref) -> tuple[str, str, str, str]:
    """``ref`` without its API version: an object a role moves to another version of its group stays the same."""
    api_version, kind, namespace, name = ref
    return api_version.rpartition("/")[0], kind, namespace, name


def stale_refs(recorded: Iterable[Iterable[str]], current: Iterable[Iterable[str]]) -> list[Ref]:
    """What a module's prune looks at: the objects its recorded inventory has and this run's inventory lacks (the
    one answer for the run and its preview)."""
    now = {group_key(tuple(r)) for r in current}  # type: ignore[arg-type]
    return [tuple(r) for r in recorded if group_key(tuple(r)) not in now]  # type: ignore[misc]


def obj_of(ref: Iterable[str]) -> Obj:
    api_version, kind, namespace, name = tuple(ref)
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, **({"namespace": namespace}
                                                                                  if namespace else {})}}


def read_recorded() -> list[Ref] | None:
    """The recorded inventory the engine gave this run (``$KS_RECORDED_INVENTORY``), or None when the module's record
    has none (a first install, or a record of an installer that kept none)."""
    recorded = _recorded_file()
    return None if recorded is None else [tuple(r) for r in recorded["refs"]]  # type: ignore[misc]


def read_recorded_facts() -> dict[str, list[str]]:
    """What the module's record holds of each object it owns (:attr:`ApplyResult.facts`), from the same file."""
    recorded = _recorded_file()
    return dict(recorded.get("objects") or {}) if recorded is not None else {}


def _recorded_file() -> dict[str, Any] | None:
    path = os.environ.get(RECORDED_ENV)
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return {"refs": data} if isinstance(data, list) else data


def object_key(ref: Iterable[str]) -> str:
    """The key of an object in the recorded facts (installer.engine.records.object_key)."""
    return "|".join(tuple(ref)[:4])


def facts_of(obj: Obj, metadata_only: bool = False) -> list[str]:
    """[UID, guard] of an object as the API server returned it (``metadata_only``: of its metadata alone, as
    the metadata-only list reads the kinds listed so)."""
    return [str(obj["metadata"].get("uid") or ""), guard({"metadata": obj["metadata"]} if metadata_only else obj)]


def opted_out(meta: Obj | None) -> bool:
    """Whether a user set :data:`SSA_ANNOTATION` on the object to keep the installer from writing it."""
    return (((meta or {}).get("annotations") or {}).get(SSA_ANNOTATION) in SSA_OPT_OUTS)


def applied_by_installer(item: Any) -> bool:
    """Whether the installer's field manager applied the object (not, e.g., Endpoints that the endpoints
    controller created for a labelled Service and gave that Service's labels)."""
    return installer_managed(item.metadata)


def installer_managed(meta: Any) -> bool:
    """Whether the installer's field manager wrote to the object whose metadata is ``meta``."""
    return any(f.get("manager") == FIELD_MANAGER for f in meta.get("managedFields") or [])


def load_definitions(definition: str | Iterable[Any]) -> list[Obj]:
    """Objects from a multi-document YAML string or a list (nested lists and ``List`` kinds flattened)."""
    docs = yaml_c.load_all(definition) if isinstance(definition, str) else list(definition)
    out: list[Obj] = []
    for doc in docs:
        if not doc:
            continue
        if isinstance(doc, list):
            out += load_definitions(doc)
        elif doc.get("kind", "").endswith("List") and "items" in doc:
            out += load_definitions(doc["items"])
        else:
            out.append(doc)
    return out


def _established(crd: Obj) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


#: How long a run waits for an object it applies that is being deleted to be gone.
TERMINATING_TIMEOUT = 180


def backoff(first: float = 0.1, limit: float = 2.0) -> Iterator[float]:
    """The pauses between polls: short at first (most waits end within a second), doubling up to ``limit``."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, limit)


class Rejected(RuntimeError):
    """The API server refused an object; the message is its own reason, naming the object."""


def api_reason(exc: ApiException) -> str:
    """The API server's own message (``Status.message``), without headers or the raw body."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return message or f"{exc.status} {exc.reason}"


@dataclass
class Change:
    """What a run does to one object, as a dry run finds it (one entry of :attr:`ApplyResult.changes`)."""

    ref: str
    """``Kind/namespace/name``."""
    action: str
    """create, update, unchanged, adopt (the original installer's, taken over), recreate, delete, kept, roll or
    error."""
    fields: list[str] = field(default_factory=list)
    """What the decision itself says changes beyond the dry-run result (a takeover's or an eviction's removed fields,
    a selector; a generator's keys)."""
    note: str = ""
    body: Obj | None = None
    """What the run applies (labelled, its digest annotated), for a preview's manifests."""
    live: Obj | None = None
    """The object as it is, when the run changes it."""
    after: Obj | None = None
    """The dry-run apply's result (what the object becomes)."""


@dataclass
class ApplyResult:
    applied: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    """Objects the original installer made whose fields this apply took over (installer.engine.adoption)."""
    immutable: list[str] = field(default_factory=list)
    """``Kind/ns/name: what was done``, for objects whose unchangeable fields differed (:meth:`Manifests._replace`)."""
    applied_refs: list[Ref] = field(default_factory=list)
    deleted_refs: list[Ref] = field(default_factory=list)
    spared: list[str] = field(default_factory=list)
    """Objects with the module's label that prune or uninstall left, and why (installer.objects.ownership)."""
    foreign: list[str] = field(default_factory=list)
    """``Kind/ns/name: removed fields of manager X: ...`` and planted ServiceAccounts recreated
    (installer.objects.foreign)."""
    changes: list[Change] = field(default_factory=list)
    """A dry run's change set, one entry per object it looked at (empty for a real run)."""
    survivors: list[Ref] = field(default_factory=list)
    """Objects a prune looked at that the deletion policy kept: they stay in the module's inventory."""
    facts: dict[str, list[str]] = field(default_factory=dict)
    """:func:`object_key` → [UID, :func:`installer.objects.foreign.guard`] of each object as the API server returned
    it to the installer's write (or as recorded, for an object left as it was)."""

    def record(self) -> None:
        """Append what was applied, deleted and spared to ``$KS_INVENTORY_FILE`` (the engine's run inventory)."""
        path = os.environ.get(INVENTORY_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"applied": self.applied_refs, "deleted": self.deleted_refs,
                                      "spared": self.spared, "foreign": self.foreign, "facts": self.facts}) + "\n")


def record_generated(refs: list[Ref]) -> None:
    """Add objects a generator task made or kept (a random password, a certificate) to the run's inventory, so the
    recorded inventory names everything the module's run made."""
    ApplyResult(applied_refs=list(refs)).record()


def inventory_entries(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The lines of a run's inventory file (:meth:`ApplyResult.record`); a line a killed run left cut short is
    skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def read_inventory(path: str | os.PathLike[str]) -> list[Ref]:
    """The objects a run left applied, from the lines :meth:`ApplyResult.record` wrote (in order)."""
    live: dict[Ref, None] = {}
    for entry in inventory_entries(path):
        live.update(dict.fromkeys(tuple(r) for r in entry["applied"]))
        for r in entry["deleted"]:
            live.pop(tuple(r), None)  # type: ignore[arg-type]
    return sorted(live)


def read_facts(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """What a run's inventory file records of each object it left applied (the last write of each)."""
    facts: dict[str, list[str]] = {}
    for entry in inventory_entries(path):
        facts.update(entry.get("facts") or {})
        for r in entry["deleted"]:
            facts.pop(object_key(r), None)
    return facts


def read_notes(path: str | os.PathLike[str], key: str) -> list[str]:
    """One list of notes of a run's inventory file, each once: ``spared`` (what prunes and uninstalls left although
    it carries the module's label, and why) or ``foreign`` (the fields of other writers its applies removed, read
    here because a task with ``no_log`` hides its result)."""
    return list(dict.fromkeys(s for entry in inventory_entries(path) for s in entry.get(key) or []))


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


#: Kinds that exist only as the module made them: one it did not make (another UID) is deleted and made again, since
#: what others made of them (a token minted for a ServiceAccount, a binding's or a webhook's history) must not carry on.
RECREATED_KINDS = ("ServiceAccount", "RoleBinding", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                   "MutatingWebhookConfiguration")
PLANTED_NOTE = "not made by module {module} nor by the original installer: deleted and created again{why}"


def planted_note(kind: str, module: str) -> str:
    """What a recreate of an object the module did not make says."""
    return PLANTED_NOTE.format(module=module, why=", so tokens minted for it no longer work"
                               if kind == "ServiceAccount" else "")
JSON_PATCH = "application/json-patch+json"


def planted(meta: Obj, named: bool, cc_created: str) -> bool:
    """Whether an existing ServiceAccount of a module's render, which no record of the module names (``meta``: its
    metadata), must be deleted and created again (tokens minted for it would stay valid): unless a record of the
    original installer names it (``named``: installer.objects.originals) and the API server created it after the cc
    (``cc_created``), as the original did. Only what the API server wrote and the original's records decide: a
    label, a field manager or an annotation is anyone's to write, and a ServiceAccount made before the cc existed
    is recreated whoever made it."""
    return not (named and str(meta.get("creationTimestamp") or "") >= cc_created)


def selector_change(live: Obj, body: Obj) -> str | None:
    """For a workload whose takeover makes its selector the render's: the change (which the API server refuses,
    so the run recreates it), else None."""
    if body["kind"] not in ORPHANED_KINDS:
        return None
    old = (live.get("spec") or {}).get("selector")
    new = (body.get("spec") or {}).get("selector")
    if new is None or normalised_selector(old) == normalised_selector(new):
        return None
    return f"spec.selector: {shown(old)} -> {shown(new)}"


def normalised_selector(selector: Any) -> Any:
    """A label selector without empty parts (``matchExpressions: []`` is no expression)."""
    return {k: v for k, v in (selector or {}).items() if v} if isinstance(selector, dict) else selector


def recreate_note(kind: str, fields: list[str]) -> str:
    pods = "; its pods are left to the new one" if kind in ORPHANED_KINDS else ""
    return f"{', '.join(fields)} cannot change: deleted and created again by the run{pods}"


def foreign_removed(obj: Obj, after: Obj, body: Obj) -> list[str]:
    """What an apply removes of other writers' fields (installer.objects.foreign), judged on its (dry-run) result."""
    plan = eviction(obj["kind"], (after.get("metadata") or {}).get("managedFields") or [], now_rfc3339(), body)
    return [f"removed fields of manager {m}: {', '.join(p)}" for m, p in sorted((plan.removed if plan else {}).items())]


#: The longest value a change's field line shows.
MAX_VALUE = 160


def shown(value: Any) -> str:
    """A value as a change's field line shows it (JSON, cut at :data:`MAX_VALUE`)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":")) if not isinstance(value, str) else json.dumps(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


@dataclass
class DryRun:
    """What a dry run takes as done although the cluster does not have it yet: the kinds (``apiVersion/Kind``) whose
    CRDs the previewed runs create, and the namespaces earlier dry runs create (filled as they go)."""

    kinds: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)


class Manifests:
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
        for obj in sorted(objects, key=lambda o: _rank(o["kind"])):
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
            if obj["kind"] == "CustomResourceDefinition" and (changed or not _established(after)):
                unestablished.append(meta["name"])
        self._wait_established(unestablished)
        if renewed:
            self._restart_users([o for o in objects if ident(o) in existed], renewed, result)
        return result

    def _restart_users(self, objects: list[Obj], renewed: set[tuple[str, str]], result: ApplyResult) -> None:
        """Restart the workloads of ``objects`` (the render's, there before the apply) whose pods run as a
        ServiceAccount this apply made anew (``renewed``): their tokens were the old one's, which the API server no
        longer accepts. As ``kubectl rollout restart`` does (a pod-template annotation, under a field manager of its
        own, which later applies keep)."""
        for obj in objects:
            if obj["kind"] not in WORKLOAD_KINDS:
                continue
            pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
            account = pod.get("serviceAccountName") or pod.get("serviceAccount") or "default"
            namespace = obj["metadata"].get("namespace") or ""
            if (namespace, account) not in renewed:
                continue
            res = self._resource(obj["apiVersion"], obj["kind"])
            patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_ANNOTATION: now_rfc3339()}}}}}
            after = res.patch(body=patch, name=obj["metadata"]["name"], namespace=namespace,
                              content_type="application/merge-patch+json", field_manager=RESTART_MANAGER).to_dict()
            result.facts[object_key(ref_of(obj))] = facts_of(after)
            if ident(obj) not in result.changed:
                result.changed.append(ident(obj))
            result.foreign.append(f"{ident(obj)}: restarted, its ServiceAccount {account} being made anew")

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

    def remove(self, objects: list[Obj], purge: bool = False) -> ApplyResult:
        """Delete each of ``objects`` (last kind first) that the deletion policy lets go (:meth:`_remove`), without
        waiting: what a prune does to objects the module no longer renders."""
        result = ApplyResult()
        for obj in sorted(objects, key=lambda o: _rank(o["kind"]), reverse=True):
            self._remove(obj, result, purge)
        return result

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

    def _take_over(self, res: Any, obj: Obj, body: Obj, meta: Obj, result: ApplyResult) -> Obj | None:
        """Take the original installer's fields of an object over (``meta``: its metadata as found) and apply the
        render again, so the fields only the original set go; a refused field that cannot change is
        :meth:`_replace`'s."""
        take_over(res, meta, obj["apiVersion"])
        result.adopted.append(ident(obj))
        try:
            return self._server_side_apply(res, body)
        except ApiException as exc:
            if exc.status != 422:
                raise
            return self._replace(res, obj, body, exc, result)

    def _foresee_takeover(self, res: Any, obj: Obj, body: Obj, live: Obj, after: Obj, refused: ApiException | None,
                          result: ApplyResult) -> None:
        """A dry run's takeover of the original installer's object, which cannot be dry-run: the fields only the
        original set are removed (installer.engine.adoption), a workload whose selector becomes the render's is
        recreated, and an apply refused for a field that cannot change is what :meth:`_replace` does."""
        if refused is not None and immutable_fields(refused):
            self._replace(res, obj, body, refused, result)
            return None
        legacy = ", ".join(sorted({e["manager"] for e in legacy_entries(live["metadata"])}))
        dropped = [f"{path}: removed (only {legacy} set it)" for path in dropped_by_takeover(live, body)]
        if refused is not None:
            note = (f"made by {legacy}: taken over in place; its fields merged with the render are refused "
                    f"({api_reason(refused)}), so the takeover moves them first and the result is the render")
            self._preview(result, Change(ident(obj), "adopt", dropped, note, body=body))
        elif (changed := selector_change(live, body)) is not None:
            self._preview(result, Change(ident(obj), "recreate", [changed], body=body,
                                         note=recreate_note(obj["kind"], ["spec.selector"])))
        else:
            self._preview(result, Change(ident(obj), "adopt", [*dropped, *foreign_removed(obj, after, body)],
                                         f"made by {legacy}: taken over in place", body=body, live=live, after=after))
        result.adopted.append(ident(obj))
        return None

    def _evict_foreign(self, res: Any, obj: Obj, body: Obj, after: Obj, result: ApplyResult,
                       attempts: int = 5) -> Obj:
        """Take the fields other writers own on ``after`` (the object as applied) over and apply again, which
        removes those the render does not set (installer.objects.foreign); returns the object as it ends. The
        managedFields patch is guarded by the resourceVersion; when the object changed meanwhile it is read again. A dry
        run writes nothing here (its change names the fields, :func:`foreign_removed`)."""
        if self.dry_run is not None:
            return after
        for _ in range(attempts):
            plan = eviction(obj["kind"], after["metadata"].get("managedFields") or [], now_rfc3339(), body)
            if plan is None:
                return after
            patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": after["metadata"]["resourceVersion"]},
                     {"op": "replace", "path": "/metadata/managedFields", "value": plan.managed_fields}]
            meta = obj["metadata"]
            try:
                moved = json.loads(res.patch(body=patch, name=meta["name"], namespace=meta.get("namespace"),
                                             content_type=JSON_PATCH, serialize=False).data)
            except ApiException as exc:
                if exc.status not in (409, 422):
                    raise
                after = self._get(res, obj).to_dict()
                continue
            if plan.removed:
                result.foreign.append(f"{ident(obj)}: {plan.describe()}")
                return self._server_side_apply(res, body)
            return moved
        raise RuntimeError(f"{ident(obj)}: changed by others while their fields were being taken over")

    def _recreate_planted(self, res: Any, obj: Obj, body: Obj, result: ApplyResult, known: list[str] | None,
                          recorded: bool) -> bool:
        """Delete a ServiceAccount of the render that exists but is not the one the module made, so that the apply
        creates it anew (with another UID: tokens minted for the old one no longer authenticate); whether it was one
        (a dry run only says so). The module's record says which it made (its UID); a module with a record that has
        no UID for it made none. Without a record (a first install, or a record of an installer that kept no UIDs),
        :func:`planted` decides (the original installer's are taken over)."""
        live = self._get(res, obj)
        if live is None:
            return False
        if known is not None:
            if live.metadata.uid == known[0]:
                return False
        elif not recorded and (obj["kind"] != "ServiceAccount" or not self.planted(live.to_dict()["metadata"])):
            return False
        if self.dry_run is not None:
            self._preview(result, Change(ident(obj), "recreate", note=planted_note(obj["kind"], self.module),
                                         body=body))
            return True
        meta = obj["metadata"]
        with contextlib.suppress(NotFoundError, ConflictError):
            res.delete(name=meta["name"], namespace=meta.get("namespace"),
                       body={"preconditions": {"uid": live.metadata.uid}})
        self._wait_gone([obj], RECREATE_TIMEOUT)
        result.foreign.append(f"{ident(obj)}: {planted_note(obj['kind'], self.module)}")
        return True

    def planted(self, meta: Obj) -> bool:
        """:func:`planted` for a ServiceAccount of this module (the cc's creation and the Helm releases left in its
        namespace read once each, when first needed)."""
        if self._cc_created is None:
            try:
                cc = self._resource(f"{CC_GROUP}/{CC_VERSION}", CC_KIND).get(name=CC_NAME, namespace=NAMESPACE)
                self._cc_created = str(cc.metadata.creationTimestamp)
            except (NotFoundError, ResourceNotFoundError):
                self._cc_created = "~"  # no cc: nothing was installed from it, nothing is the original's
        namespace = meta.get("namespace") or ""
        if namespace not in self._released:
            self._released[namespace] = release_objects(helm_records(self.dyn.client, {namespace}), set())
        key = ("ServiceAccount", namespace, meta["name"])
        return planted(meta, named_by_original(key, self._released[namespace]), self._cc_created)

    def _replace(self, res: Any, obj: Obj, body: Obj, refused: ApiException, result: ApplyResult) -> Obj | None:
        """What ``helm upgrade --force`` / ``kubectl replace --force`` do for an object whose apply was refused only
        because fields cannot change: delete it and create it as rendered. A workload is deleted orphaning its
        ReplicaSets (ControllerRevisions) and pods, which the new one adopts by its selector: pods stay when its pod
        template is theirs. A PersistentVolumeClaim is never deleted: it is kept as it is (its spec as found) and
        reported. Any other refusal (or a Namespace, a CRD, a PersistentVolume) is raised. A dry run says which
        (None)."""
        fields = immutable_fields(refused)
        kind = obj["kind"]
        if not fields or (kind in NEVER_RECREATED and kind != "PersistentVolumeClaim"):
            raise refused
        what = f"{', '.join(fields)} cannot change"
        if self.dry_run is not None:
            self._preview(result, Change(ident(obj), "kept", note=f"{what}: kept as it is, reported", body=body)
                          if kind == "PersistentVolumeClaim" else
                          Change(ident(obj), "recreate", note=recreate_note(kind, fields), body=body))
            return None
        if kind == "PersistentVolumeClaim":
            live = self._get(res, obj)
            if live is None:
                raise refused
            kept = copy.deepcopy(body)
            kept["spec"] = live.to_dict().get("spec") or {}
            after = self._server_side_apply(res, kept)
            result.immutable.append(f"{ident(obj)}: kept as it is ({what}; the render's spec is not applied)")
            return after
        orphan = kind in ORPHANED_KINDS
        meta = obj["metadata"]
        with contextlib.suppress(NotFoundError):
            res.delete(name=meta["name"], namespace=meta.get("namespace"),
                       body={"propagationPolicy": "Orphan" if orphan else "Background"})
        self._wait_gone([obj], RECREATE_TIMEOUT)
        after = self._server_side_apply(res, body)
        result.immutable.append(f"{ident(obj)}: deleted and created again ({what}"
                                f"{'; its pods were left to the new one' if orphan else ''})")
        return after

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

    def delete(self, objects: list[Obj], purge: bool = False, timeout: int = 300, kinds: Iterable[str] = (),
               tenants: Iterable[str] = ()) -> ApplyResult:
        """Delete every object of the given objects' kinds (plus ``kinds``) that carries this module's label.

        ``purge`` also deletes the module's PVCs and Secrets (a generated password kept with the data it
        guards), the PVCs its StatefulSets (its own, or made by an operator from
        one of its objects, like Prometheus') claimed through volumeClaimTemplates, and its CRDs no custom
        resource is left of."""
        result = ApplyResult()
        wanted = _kinds(objects, [*kinds, *(PURGED_KINDS if purge else ())])
        self._delete_staged(self._owned(wanted, result), result, purge, timeout, tenants)
        return result

    def absent(self, objects: list[Obj], recorded: list[Ref] | None, purge: bool = False, timeout: int = 300,
               kinds: Iterable[str] = (), tenants: Iterable[str] = (), keep: Iterable[str] = ()) -> ApplyResult:
        """What ``ks_manifest`` with ``state: absent`` deletes: exactly ``objects`` when given (:meth:`delete_refs`),
        else the module's labelled objects of ``kinds`` when given (:meth:`delete`), else everything the module
        made (:meth:`uninstall`, ``recorded`` being its recorded inventory)."""
        if objects:
            return self.delete_refs(objects, purge=purge, timeout=timeout, tenants=tenants)
        if kinds:
            return self.delete([], purge=purge, timeout=timeout, kinds=kinds, tenants=tenants)
        return self.uninstall(recorded, purge=purge, timeout=timeout, keep=keep, tenants=tenants)

    def uninstall(self, recorded: list[Ref] | None, purge: bool = False, timeout: int = 300,
                  keep: Iterable[str] = (), tenants: Iterable[str] = ()) -> ApplyResult:
        """Delete what the module made: its recorded inventory (``None``: a record without one, whose objects are
        found by the module's label over every kind the API serves, cluster-scoped ones only when
        :meth:`_served_only_by` what it deletes), the last apply stage first (each stage gone
        before the next), through the deletion policy (:meth:`_remove`). ``keep`` names objects (``Kind/ns/name``,
        or a kind) the module keeps on uninstall (a password kept with the volume whose data it guards): a purge
        deletes those of :data:`PURGED_KINDS`. A purge also looks at the module's labelled PVCs and Secrets."""
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
                owned += [o for o in self._owned(_kinds([], PURGED_KINDS), result) if ident(o) not in known]
        purged = {parse_kind(k)[1] for k in PURGED_KINDS} if purge else set()
        kept = set(keep)
        owned = [o for o in owned if not (ident(o) in kept or o["kind"] in kept) or o["kind"] in purged]
        self._delete_staged(owned, result, purge, timeout, tenants)
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

    def delete_refs(self, objects: list[Obj], purge: bool = False, timeout: int = 300,
                    tenants: Iterable[str] = ()) -> ApplyResult:
        """Delete exactly ``objects`` (those the module owns), through the deletion policy, and wait until they are
        gone: a role's removal of objects it turns off."""
        result = ApplyResult()
        self._delete_staged(self._owned_refs([ref_of(o) for o in objects], result), result, purge, timeout, tenants)
        return result

    def prune_inventory(self, recorded: Iterable[Iterable[str]], current: Iterable[Iterable[str]],
                        propagation: str = "Background", timeout: int | None = None) -> ApplyResult:
        """Delete what the module's recorded inventory has and its run's inventory (``current``) lacks
        (:func:`stale_refs`), last stage first, through the deletion policy; a Secret a task generated (never
        applied from a render: a credential, a certificate) is kept too. What is kept stays in the inventory
        (``survivors``). With ``timeout``, wait until the deleted objects are gone (with ``Foreground``: their
        pods too)."""
        result = ApplyResult()
        owned = sorted(self._owned_refs(stale_refs(recorded, current), result), key=_uninstall_order)
        for obj in owned:
            annotations = obj["metadata"].get("annotations") or {}
            if obj["kind"] == "Secret" and APPLIED_ANNOTATION not in annotations:
                result.kept.append(f"{ident(obj)} (generated)")
                self._preview(result, Change(ident(obj), "kept", note="generated"))
                continue
            self._remove(obj, result, purge=False, propagation=propagation)
        gone = set(result.deleted)
        result.survivors = [ref_of(o) for o in owned if ident(o) not in gone]
        if timeout is not None:
            self._wait_gone([o for o in owned if ident(o) in gone], timeout)
        for obj in owned:
            obj["metadata"].pop("annotations", None)
        return result

    def labelled(self) -> dict[str, list[Ref]]:
        """Every object the installer applied that carries a module's label, by module, over every kind the API
        serves: one metadata-only list per kind, for all modules at once (a reconcile that installs several
        modules reads it once: :class:`LabelledObjects`)."""
        found: dict[str, list[Ref]] = {}
        for api_version, kind in sorted(self._served_kinds()):
            try:
                raw = self._resource(api_version, kind).get(label_selector=MODULE_LABEL, serialize=False,
                                                            header_params={"Accept": PARTIAL_METADATA_LIST})
            except (NotFoundError, ResourceNotFoundError, ApiException):  # kind not served: nothing to find
                continue
            for item in json.loads(raw.data).get("items") or []:
                meta = item["metadata"]
                if installer_managed(meta):
                    module = (meta.get("labels") or {}).get(MODULE_LABEL, "")
                    found.setdefault(module, []).append((api_version, kind, meta.get("namespace") or "",
                                                         meta["name"]))
        return found

    def labelled_refs(self, labelled: dict[str, list[Ref]] | None = None) -> list[Ref]:
        """The module's objects found by its label over every kind the API serves (those the installer applied and
        that lie in its namespaces; ``labelled``: :meth:`labelled`, read already): what an install prunes besides
        its recorded inventory, so that what an earlier installation of the module left in its namespaces when its
        record was lost (a forgotten state) goes too. Never a cluster-scoped object: a label and a field manager's
        name are all that would say it is the module's, and anyone who can write it can set both."""
        found = (self.labelled() if labelled is None else labelled).get(self.module, [])
        return [ref for ref in found if ref[2] and why_spared(self.module, ref) is None]

    def prune_base(self, recorded: Iterable[Iterable[str]], install: bool,
                   labelled: dict[str, list[Ref]] | None = None) -> list[Ref]:
        """What a run's prune compares with its inventory: the recorded inventory, and for an install the module's
        labelled objects too (:meth:`labelled_refs`; one reference per object whatever its API version)."""
        base = [tuple(r) for r in recorded]
        if install:
            known = {group_key(r) for r in base}  # type: ignore[arg-type]
            base += [r for r in self.labelled_refs(labelled) if group_key(r) not in known]
        return base  # type: ignore[return-value]

    def _delete_staged(self, owned: list[Obj], result: ApplyResult, purge: bool, timeout: int,
                       tenants: Iterable[str]) -> None:
        """Delete ``owned`` through the deletion policy, the apply stages backwards, each gone before the next."""
        claims = self._stateful_claims(owned) if purge else []
        for level in (2, 1, 0):
            objects = sorted((o for o in owned if stage(o["apiVersion"], o["kind"]) == level), key=_uninstall_order)
            for obj in objects:
                self._remove(obj, result, purge, tenants)
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
            if (why := why_spared(self.module, ref_of(obj))) is not None:
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
        uids = {live.metadata.uid for o in owned if (live := _live(self.dyn, o)) is not None}
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
                obj = {"apiVersion": api_version, "kind": kind,
                       "metadata": {"name": item.metadata.name, "namespace": item.metadata.namespace}}
                if not applied_by_installer(item):
                    continue
                if (why := why_spared(self.module, ref_of(obj))) is None:
                    out.append(obj)
                else:
                    result.spared.append(f"{ident(obj)}: {why}")
        return out

    def _remove(self, obj: Obj, result: ApplyResult, purge: bool, tenants: Iterable[str] = (),
                propagation: str = "Background") -> None:
        """Delete ``obj`` unless the deletion policy keeps it: PVCs, CRDs (deleting one deletes every object of
        its kind) and namespaces holding PVCs stay unless ``purge``. Prune and uninstall both go through here."""
        why: str | None = None
        if not purge and obj["kind"] in KEPT_ON_UNINSTALL:
            why = ""
        elif obj["kind"] == "CustomResourceDefinition" and self._has_resources(obj["metadata"]["name"]):
            why = "custom resources of it are left"
        elif obj["kind"] == "Namespace" and not purge and self._has_pvcs(obj["metadata"]["name"]):
            why = "holds PersistentVolumeClaims"
        elif obj["kind"] == "Namespace" and (others := self._other_modules_in(obj["metadata"]["name"], tenants)):
            why = f"holds objects of {', '.join(others)}"
        if why is None:
            self._delete(obj, result, propagation)
            return
        result.kept.append(ident(obj) + (f" ({why})" if why else ""))
        self._preview(result, Change(ident(obj), "kept", note=why))

    def _delete(self, obj: Obj, result: ApplyResult, propagation: str = "Background") -> None:
        res = self._resource(obj["apiVersion"], obj["kind"])
        if self.dry_run is not None:  # what exists is what the run deletes
            if self._get(res, obj) is not None:
                result.deleted.append(ident(obj))
                result.deleted_refs.append(ref_of(obj))
                self._gone = self._gone | {ident(obj)}
                self._preview(result, Change(ident(obj), "delete"))
            return
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

    def _other_modules_in(self, namespace: str, tenants: Iterable[str] = ()) -> list[str]:
        """Other modules with objects of :data:`TENANT_KINDS` (plus ``tenants``) in ``namespace``: deleting it
        would delete theirs."""
        selector = f"{MODULE_LABEL},{MODULE_LABEL}!={self.module}"
        found: set[str] = set()
        for api_version, kind in dict.fromkeys(parse_kind(k) for k in (*TENANT_KINDS, *tenants)):
            try:
                items = self._resource(api_version, kind).get(namespace=namespace, label_selector=selector).items
            except (NotFoundError, ResourceNotFoundError, ApiException):  # kind not served: nothing of it
                continue
            found |= {(i.metadata.labels or {}).get(MODULE_LABEL, "") for i in items}
        return sorted(found - {""})

    def _has_pvcs(self, namespace: str) -> bool:
        return bool(client.CoreV1Api(self.dyn.client).list_namespaced_persistent_volume_claim(namespace).items)

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

    def _wait_gone(self, objects: list[Obj], timeout: int) -> None:
        if self.dry_run is not None:
            return
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

    def wait_ready(self, objects: list[Obj], timeout: int = 600) -> None:
        """Wait until the objects among ``objects`` that have a readiness (see :data:`WAITED_KINDS`) are ready."""
        wait_ready(self.dyn, objects, timeout)


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
#: The pod-template annotation a restart sets (kubectl rollout restart's) and the field manager it writes under.
RESTARTED_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
RESTART_MANAGER = "ks-installer-restart"
#: Kinds :func:`wait_ready` waits for: workloads, Jobs (complete) and APIServices (Available).
WAITED_KINDS = (*WORKLOAD_KINDS, "Job", "APIService")


class JobFailed(RuntimeError):
    """A Job the module waits for has failed."""


def deployment_ref(name: str, namespace: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace}}


def _condition(live: Any, type_: str) -> dict[str, Any] | None:
    conditions = (live.status or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == type_), None)


def ready(live: Any) -> bool:
    """Whether an object is ready: a Deployment as ``kubectl rollout status`` says (the newest generation
    observed, every replica updated and available, no old replica left), a StatefulSet or DaemonSet with every
    replica ready, a Job complete, an APIService Available. A Deployment its user paused (``kubectl rollout pause``)
    rolls out nothing until resumed: it is left to them and counts as ready, as Helm's ``--wait`` counts it."""
    if live is None:
        return False
    spec, status, kind = live.spec, live.status or {}, live.kind
    if kind == "Deployment" and spec.get("paused"):
        return True
    if kind == "APIService":
        return (_condition(live, "Available") or {}).get("status") == "True"
    if kind == "Job":
        return (_condition(live, "Complete") or {}).get("status") == "True"
    if (status.get("observedGeneration") or 0) < (live.metadata.generation or 0):
        return False
    if kind == "DaemonSet":
        return (status.get("numberReady") or 0) >= (status.get("desiredNumberScheduled") or 1) > 0
    wanted = spec.get("replicas", 1)
    if kind == "StatefulSet":
        return (status.get("readyReplicas") or 0) >= wanted
    updated = status.get("updatedReplicas") or 0
    return updated >= wanted and (status.get("replicas") or 0) <= updated \
        and (status.get("availableReplicas") or 0) >= wanted


def _why(live: Any) -> str:
    """What the API says about an object that is not ready (the reason of its condition), or ``""``."""
    if live is None:
        return " (not found)"
    condition = {"APIService": "Available", "Job": "Failed"}.get(live.kind)
    found = _condition(live, condition) if condition else None
    if not found:
        return ""
    return f" ({found.get('reason') or ''}: {found.get('message') or ''})"


class WaitStopped(RuntimeError):
    """A wait given up because the caller is stopping."""


def wait_ready(dyn: DynamicClient, objects: list[Obj], timeout: float = 600,
               stop: threading.Event | None = None) -> None:
    """Poll the objects among ``objects`` of :data:`WAITED_KINDS` until each is :func:`ready`; TimeoutError
    names the rest (with the API's reason where it gives one), JobFailed a Job that failed, WaitStopped that
    ``stop`` was set."""
    deadline = time.monotonic() + timeout
    pending = [o for o in objects if o["kind"] in WAITED_KINDS]
    delays = backoff(first=0.25)
    while pending:
        live = {ident(o): _live(dyn, o) for o in pending}
        for name, obj in live.items():
            failed = obj is not None and obj.kind == "Job" and _condition(obj, "Failed")
            if failed and failed.get("status") == "True":
                raise JobFailed(f"{name} failed{_why(obj)}")
        pending = [o for o in pending if not ready(live[ident(o)])]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not ready after {int(timeout)}s: "
                               + ", ".join(ident(o) + _why(live[ident(o)]) for o in pending))
        delay = next(delays)
        if stop is None:
            time.sleep(delay)
        elif stop.wait(delay):
            raise WaitStopped("stopped while waiting for " + ", ".join(ident(o) for o in pending))


def _live(dyn: DynamicClient, obj: Obj) -> Any:
    try:
        return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).get(
            name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
    except NotFoundError:
        return None
