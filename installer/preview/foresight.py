"""A preview of a module's apply, prune and uninstall: the decisions a run makes (installer.objects.planning), each
shown with what its write would do (a server-side dry run, ``dryRun=All``), nothing written (:class:`Foresight`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.objects.api_errors import api_reason, immutable_fields
from installer.objects.change_set import Decision, Foreseen
from installer.objects.field_takeover import dropped_by_takeover, legacy_entries
from installer.objects.manifests import STAGES, Manifests
from installer.objects.refs import Obj, ident, ref_of, stage
from installer.objects.repair import foreign_removed, recreate_note, replace_change, selector_change
from installer.objects.results import ApplyResult, Change
from installer.settings import FIELD_MANAGER


class Foresight(Manifests):
    """What a run of a module's objects would do, as :attr:`ApplyResult.changes` (one :class:`Change` per object):
    the run's own decisions, reads and dry-run applies only. What cannot be dry-run (the takeover of the original
    installer's object, a recreate) is foreseen from the same decisions; ``foreseen`` says what the previewed runs
    create before (CRDs' kinds, namespaces)."""

    def __init__(self, api: client.ApiClient, module: str, foreseen: Foreseen,
                 facts: dict[str, list[str]] | None = None, namespaces: Iterable[str] | None = None,
                 tenant_kinds: Iterable[str] | None = None) -> None:
        super().__init__(api, module, facts, namespaces, tenant_kinds)
        self.foreseen = foreseen

    def _preview(self, result: ApplyResult, change: Change) -> None:
        result.changes.append(change)

    def apply(self, objects: list[Obj]) -> ApplyResult:
        """The change set of :meth:`Manifests.apply` of ``objects``, stage by stage."""
        result = ApplyResult()
        for level in STAGES:
            staged = [o for o in objects if stage(o["apiVersion"], o["kind"]) == level]
            for decision in self.plan(staged) if staged else ():
                change = self._foresee(decision, result)
                result.changes.append(change)
                result.actions.setdefault(change.ref, change.action)
        return result

    def _foresee(self, d: Decision, result: ApplyResult) -> Change:
        """What carrying out ``d`` does to its object."""
        obj, body = d.obj, d.body
        if d.action in ("error", "kept", "unchanged", "recreate") or (d.action == "create" and d.note):
            return Change(d.ref, d.action, note=d.note, body=body)
        res = self._resource(obj["apiVersion"], obj["kind"])
        current = self._get(res, obj)
        live = current.to_dict() if current is not None else None
        try:
            after = self._dry_apply(res, body)
        except ApiException as exc:
            namespace = obj["metadata"].get("namespace")
            if exc.status == 404 and self.foreseen is not None and namespace in self.foreseen.namespaces:
                return Change(d.ref, "create", note=f"namespace {namespace} is created first", body=body)
            if exc.status == 422 and d.action == "adopt" and live is not None:
                return self._foresee_takeover(obj, body, live, live, exc, result)
            if exc.status == 422 and (change := replace_change(obj, body, exc)) is not None:
                return change
            return Change(d.ref, "error", note=api_reason(exc), body=body)
        if d.action == "adopt" and live is not None:
            return self._foresee_takeover(obj, body, live, after, None, result)
        return Change(d.ref, "create" if live is None else "update",
                      [] if live is None else foreign_removed(obj, after, body), body=body, live=live, after=after)

    def _foresee_takeover(self, obj: Obj, body: Obj, live: Obj, after: Obj, refused: ApiException | None,
                          result: ApplyResult) -> Change:
        """The takeover of the original installer's object, which cannot be dry-run: the fields only the original
        set are removed (installer.engine.adoption), a workload whose selector becomes the render's is recreated,
        and an apply refused for a field that cannot change is what :meth:`Manifests._replace` does."""
        result.adopted.append(ident(obj))
        if refused is not None and immutable_fields(refused):
            return replace_change(obj, body, refused) or Change(ident(obj), "error", note=api_reason(refused),
                                                                 body=body)
        legacy = ", ".join(sorted({e["manager"] for e in legacy_entries(live["metadata"])}))
        dropped = [f"{path}: removed (only {legacy} set it)" for path in dropped_by_takeover(live, body)]
        if refused is not None:
            note = (f"made by {legacy}: taken over in place; its fields merged with the render are refused "
                    f"({api_reason(refused)}), so the takeover moves them first and the result is the render")
            return Change(ident(obj), "adopt", dropped, note, body=body)
        if (changed := selector_change(live, body)) is not None:
            return Change(ident(obj), "recreate", [changed], body=body,
                          note=recreate_note(obj["kind"], ["spec.selector"]))
        return Change(ident(obj), "adopt", [*dropped, *foreign_removed(obj, after, body)],
                      f"made by {legacy}: taken over in place", body=body, live=live, after=after)

    @staticmethod
    def _dry_apply(res: Any, body: Obj) -> Obj:
        """A server-side dry run of the run's apply: the object as it would be."""
        meta = body["metadata"]
        return json.loads(res.server_side_apply(body=body, name=meta["name"], namespace=meta.get("namespace"),
                                                field_manager=FIELD_MANAGER, force_conflicts=True, serialize=False,
                                                dry_run="All").data)

    def _delete(self, obj: Obj, result: ApplyResult, propagation: str = "Background") -> None:
        """What the run deletes: what exists (an apply after it creates it again)."""
        if self._get(self._resource(obj["apiVersion"], obj["kind"]), obj) is not None:
            result.deleted.append(ident(obj))
            result.deleted_refs.append(ref_of(obj))
            self.gone.add(ident(obj))
            self._preview(result, Change(ident(obj), "delete"))

    def _wait_gone(self, objects: list[Obj], timeout: int) -> None:
        """Nothing is deleted: nothing to wait for."""
