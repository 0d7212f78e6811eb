"""Deciding what an apply does to each object of one stage, from what the cluster holds and the module's record,
reading only (:class:`Planning`, a part of :class:`installer.objects.manifests.Manifests`).

Ownership, "unchanged" and other writers' fields are decided here, from what the API server wrote (UIDs,
resourceVersions, managedFields) and the module's record of them, never from a label, a manager's name or a time.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.objects.change_set import Decision, Foreseen
from installer.objects.field_takeover import legacy_entries
from installer.objects.foreign import clean
from installer.objects.inventory import METADATA_LISTED, facts_of, object_key
from installer.objects.refs import PARTIAL_METADATA_LIST, Obj, ident, rank, ref_of
from installer.objects.repair import RECREATED_KINDS, planted_note
from installer.settings import APPLIED_ANNOTATION, MANAGED_BY, MODULE_LABEL, SSA_ANNOTATION, SSA_OPT_OUTS

#: A recreate's note for an object being deleted.
TERMINATING_NOTE = "being deleted: created again once gone"


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


def opted_out(meta: Obj | None) -> bool:
    """Whether :data:`SSA_ANNOTATION` keeps the installer from writing an object that exists: set by a user on the
    object, or by the role on what it renders (made once, then left to its users)."""
    return (((meta or {}).get("annotations") or {}).get(SSA_ANNOTATION) in SSA_OPT_OUTS)


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


class Planning:
    """Deciding what an apply does to each object (:meth:`plan`)."""

    module: str
    foreseen: Foreseen | None
    gone: set[str]
    facts: dict[str, list[str]]

    def plan(self, objects: list[Obj]) -> list[Decision]:
        """What the run does to each of ``objects`` (one apply stage), in apply order, reading the cluster only:
        one metadata-aware list per kind of the module's labelled objects, and a read of each object the list
        lacks (it may exist unlabelled: the original installer's, or someone's)."""
        lists: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        decisions: list[Decision] = []
        for obj in sorted(objects, key=lambda o: rank(o["kind"])):
            body = as_applied(obj, self.module)
            res = self._served_for_plan(obj)
            if res is None:
                decisions.append(self._unserved(obj, body))
                continue
            key = (obj["apiVersion"], obj["kind"])
            if obj["kind"] == "Namespace":
                listed = None
            else:
                if key not in lists:
                    lists[key] = self._labelled_of_kind(res)
                listed = lists[key].get((obj["metadata"].get("namespace") or "", obj["metadata"]["name"]))
            decisions.append(self._decide(res, obj, body, listed))
        return decisions

    def _served_for_plan(self, obj: Obj) -> Any:
        """The API resource of ``obj``'s kind (a run waits a while for discovery to serve it; a preview does not:
        None when it is not served)."""
        if self.foreseen is None:
            return self._await_served(obj["apiVersion"], obj["kind"])
        try:
            return self._resource(obj["apiVersion"], obj["kind"])
        except Exception:
            return None

    def _unserved(self, obj: Obj, body: Obj) -> Decision:
        """A preview's object whose kind is not served: created when a previewed CRD serves it, else an error."""
        kind = f"{obj['apiVersion']}/{obj['kind']}"
        if self.foreseen is not None and kind in self.foreseen.kinds:
            return Decision(obj, "create", body, note="its CustomResourceDefinition is created first")
        return Decision(obj, "error", body, note=f"kind {kind} is not served")

    def _decide(self, res: Any, obj: Obj, body: Obj, listed: Obj | None) -> Decision:
        """The decision for one object (``listed``: it as the module's labelled list has it)."""
        live = listed
        if live is None:
            found = self._get(res, obj)
            live = found.to_dict() if found is not None else None
        if live is not None and live["metadata"].get("deletionTimestamp"):
            if obj["kind"] == "Namespace" and self.foreseen is not None:
                self.foreseen.namespaces.add(obj["metadata"]["name"])
            return Decision(obj, "recreate", body, note=TERMINATING_NOTE, live=live)
        if obj["kind"] == "Namespace" and live is not None:
            owner = (live["metadata"].get("labels") or {}).get(MODULE_LABEL)
            if owner and owner != self.module:
                # Another module's: applied under the shared field manager, it would lose its fields (its label).
                return Decision(obj, "kept", body, note=f"belongs to module {owner}", live=live, adopt=False)
            # One nobody labelled is used, never adopted: it must survive this module's uninstall.
            adopt = owner == self.module
            return self._judged(obj, as_applied(obj, self.module, adopt), live, live, adopt)
        if obj["kind"] == "Namespace" and self.foreseen is not None:
            self.foreseen.namespaces.add(obj["metadata"]["name"])  # created by the run: its objects cannot be dry-run
        return self._judged(obj, body, live, listed)

    def _judged(self, obj: Obj, body: Obj, live: Obj | None, listed: Obj | None, adopt: bool = True) -> Decision:
        """The decision for an object that is not being deleted (``listed``: it when the module's labelled list has
        it; only those can be left as they are)."""
        known = self.facts.get(object_key(ref_of(obj)))
        metadata_only = obj["kind"] in METADATA_LISTED
        if ident(obj) in self.gone:
            return Decision(obj, "recreate", body, note="deleted and applied again by the run")
        if live is None:
            return Decision(obj, "create", body, adopt=adopt)
        if listed is not None and (opted_out(listed["metadata"]) or opted_out(obj["metadata"])):
            value = (listed["metadata"].get("annotations") or {}).get(SSA_ANNOTATION) or \
                obj["metadata"]["annotations"][SSA_ANNOTATION]
            return Decision(obj, "kept", body, note=f"{SSA_ANNOTATION}: {value}", live=live,
                            adopt=adopt)
        if opted_out(obj["metadata"]) and not (adopt and legacy_entries(live["metadata"])):
            # Made once by the render, and this one is not the module's (nor the original installer's, taken over
            # below): left as it is, outside the module's inventory.
            return Decision(obj, "kept", body, note=f"{SSA_ANNOTATION}: IfNotPresent; not the module's", live=live,
                            adopt=False)
        digest = body["metadata"]["annotations"][APPLIED_ANNOTATION]
        if listed is not None and unchanged_since_applied(listed, digest, body, known, metadata_only):
            return Decision(obj, "unchanged", body, live=live, adopt=adopt)
        if obj["kind"] in RECREATED_KINDS and self._made_by_another(obj, live, known):
            return Decision(obj, "recreate", body, note=planted_note(obj["kind"], self.module), live=live,
                            renew=True)
        if listed is None and adopt and legacy_entries(live["metadata"]):
            legacy = ", ".join(sorted({e["manager"] for e in legacy_entries(live["metadata"])}))
            return Decision(obj, "adopt", body, note=f"made by {legacy}: taken over in place", live=live)
        return Decision(obj, "update", body, live=live, adopt=adopt)

    def _made_by_another(self, obj: Obj, live: Obj, known: list[str] | None) -> bool:
        """Whether an existing object of :data:`RECREATED_KINDS` is not the one the module made, so that the run
        deletes it and creates it anew (with another UID: tokens minted for an old ServiceAccount no longer
        authenticate). The module's record says which it made (its UID); a module with a record that has no UID for
        it made none. Without a record (a first install, or a record of an installer that kept no UIDs),
        :func:`installer.objects.repair.planted` decides for a ServiceAccount (the original installer's are taken
        over)."""
        if known is not None:
            return live["metadata"].get("uid") != known[0]
        if self.facts:
            return True
        return obj["kind"] == "ServiceAccount" and self.planted(live["metadata"])

    def _labelled_of_kind(self, res: Any) -> dict[tuple[str, str], Obj]:
        """``(namespace, name)`` → this module's objects of one kind as they are (one list; of the kinds in
        :data:`METADATA_LISTED`, their metadata only)."""
        header = {"Accept": PARTIAL_METADATA_LIST} if res.kind in METADATA_LISTED else {}
        try:
            raw = res.get(label_selector=f"{MODULE_LABEL}={self.module}", serialize=False, header_params=header)
        except (NotFoundError, ResourceNotFoundError):
            return {}
        return {(i["metadata"].get("namespace") or "", i["metadata"]["name"]): i
                for i in json.loads(raw.data).get("items") or []}
