"""Repairs of objects the module renders that exist not as it made them: the original installer's taken over,
other writers' denied fields evicted, planted objects made anew, immutable fields replaced, and the workloads
running as a ServiceAccount made anew restarted (:class:`Repairs`, a part of
:class:`installer.objects.manifests.Manifests`).
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.objects.api_errors import immutable_fields
from installer.objects.field_takeover import now_rfc3339, take_over
from installer.objects.foreign import eviction
from installer.objects.inventory import facts_of, object_key
from installer.objects.originals import helm_records, named_by_original, release_objects
from installer.objects.readiness import WORKLOAD_KINDS
from installer.objects.refs import Obj, ident, ref_of
from installer.objects.results import ApplyResult, Change
from installer.settings import (
    CC_GROUP,
    CC_KIND,
    CC_NAME,
    CC_VERSION,
    NAMESPACE,
)

#: Kinds never deleted to change a field that cannot change (a PVC is kept as it is and reported; the rest fail).
NEVER_RECREATED = ("PersistentVolumeClaim", "PersistentVolume", "Namespace", "CustomResourceDefinition")
#: Kinds deleted with ``propagationPolicy: Orphan`` when they are recreated: their pods stay for the new object.
ORPHANED_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
#: How long a recreate waits for the deleted object to be gone (an orphaning delete waits for the garbage collector).
RECREATE_TIMEOUT = 120


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


def replace_change(obj: Obj, body: Obj, refused: ApiException) -> Change | None:
    """What :meth:`Repairs._replace` does for an apply refused only because fields cannot change, as a preview shows
    it (None: it fails with the refusal)."""
    fields = immutable_fields(refused)
    kind = obj["kind"]
    if not fields or (kind in NEVER_RECREATED and kind != "PersistentVolumeClaim"):
        return None
    if kind == "PersistentVolumeClaim":
        return Change(ident(obj), "kept", note=f"{', '.join(fields)} cannot change: kept as it is, reported", body=body)
    return Change(ident(obj), "recreate", note=recreate_note(kind, fields), body=body)


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
#: The pod-template annotation a restart sets (kubectl rollout restart's) and the field manager it writes under.
RESTARTED_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
RESTART_MANAGER = "ks-installer-restart"


class Repairs:
    """Repairs of objects the module renders that exist not as it made them: the original installer's taken over,"""

    dyn: DynamicClient
    module: str

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

    def _take_over(self, res: Any, obj: Obj, body: Obj, meta: Obj, result: ApplyResult) -> Obj:
        """Take the original installer's fields of an object over (``meta``: its metadata as found) and apply the
        render again, so the fields only the original set go; a refused field that cannot change is
        :meth:`_replace`'s."""
        take_over(res, meta, obj["apiVersion"])
        result.adopted.append(ident(obj))
        return self._apply_or_replace(res, obj, body, result)

    def _apply_or_replace(self, res: Any, obj: Obj, body: Obj, result: ApplyResult) -> Obj:
        """Server-side apply ``body``; one refused only because fields cannot change is :meth:`_replace`'s."""
        try:
            return self._server_side_apply(res, body)
        except ApiException as exc:
            if exc.status != 422:
                raise
            return self._replace(res, obj, body, exc, result)

    def _evict_foreign(self, res: Any, obj: Obj, body: Obj, after: Obj, result: ApplyResult,
                       attempts: int = 5) -> Obj:
        """Take the fields other writers own on ``after`` (the object as applied) over and apply again, which
        removes those the render does not set (installer.objects.foreign); returns the object as it ends. The
        managedFields patch is guarded by the resourceVersion; when the object changed meanwhile it is read again. A
        preview names the fields instead (:func:`foreign_removed`)."""
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

    def _replace(self, res: Any, obj: Obj, body: Obj, refused: ApiException, result: ApplyResult) -> Obj:
        """What ``helm upgrade --force`` / ``kubectl replace --force`` do for an object whose apply was refused only
        because fields cannot change: delete it and create it as rendered. A workload is deleted orphaning its
        ReplicaSets (ControllerRevisions) and pods, which the new one adopts by its selector: pods stay when its pod
        template is theirs. A PersistentVolumeClaim is never deleted: it is kept as it is (its spec as found) and
        reported. Any other refusal (or a Namespace, a CRD, a PersistentVolume) is raised (a preview foresees the
        same: :func:`replace_change`)."""
        fields = immutable_fields(refused)
        kind = obj["kind"]
        if not fields or (kind in NEVER_RECREATED and kind != "PersistentVolumeClaim"):
            raise refused
        what = f"{', '.join(fields)} cannot change"
        if kind == "PersistentVolumeClaim":
            live = self._get(res, obj)
            if live is None:
                raise refused
            kept = copy.deepcopy(body)
            kept["spec"] = live.to_dict().get("spec") or {}
            after = self._server_side_apply(res, kept)
            result.actions[ident(obj)] = "kept"
            result.immutable.append(f"{ident(obj)}: kept as it is ({what}; the render's spec is not applied)")
            return after
        orphan = kind in ORPHANED_KINDS
        meta = obj["metadata"]
        with contextlib.suppress(NotFoundError):
            res.delete(name=meta["name"], namespace=meta.get("namespace"),
                       body={"propagationPolicy": "Orphan" if orphan else "Background"})
        self._wait_gone([obj], RECREATE_TIMEOUT)
        after = self._server_side_apply(res, body)
        result.actions[ident(obj)] = "recreate"
        result.immutable.append(f"{ident(obj)}: deleted and created again ({what}"
                                f"{'; its pods were left to the new one' if orphan else ''})")
        return after
