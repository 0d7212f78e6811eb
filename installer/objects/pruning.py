"""Pruning a module's objects (:class:`Pruning`, a part of :class:`installer.objects.manifests.Manifests`): after a
successful run, what its recorded inventory has and the run's lacks goes, through the deletion policy
(installer.objects.removal); an install also prunes what carries its label in its namespaces (what an earlier
installation left when its record was lost).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.objects.ownership import why_spared
from installer.objects.refs import (
    PARTIAL_METADATA_LIST,
    Obj,
    Ref,
    group_key,
    ident,
    installer_managed,
    ref_of,
    stale_refs,
    uninstall_order,
)
from installer.objects.removal import PRUNE_KEPT, Removal, prune_disabled
from installer.objects.results import ApplyResult
from installer.settings import APPLIED_ANNOTATION, MODULE_LABEL

#: How many of the per-kind lists run at once.
LISTS_AT_ONCE = 4
T = TypeVar("T")
R = TypeVar("R")


def side_by_side(read: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``read`` of each of ``items`` (API reads), :data:`LISTS_AT_ONCE` at a time, in their order."""
    with ThreadPoolExecutor(max_workers=LISTS_AT_ONCE) as pool:
        return list(pool.map(read, items))


def labelled_items(res: Any, metadata_only: bool = True, modules: Iterable[str] | None = None,
                   from_cache: bool = False) -> list[Obj]:
    """Every object of a kind (``res``) that carries a module's label, as the API server sends them
    (``metadata_only``: a metadata-only list); with ``modules``, only theirs (the server selects them).
    ``from_cache``: as the API server's watch cache has them (``resourceVersion=0``: no read of etcd, possibly a
    moment behind it), for a check that a later check repeats."""
    header = {"Accept": PARTIAL_METADATA_LIST} if metadata_only else {}
    selector = MODULE_LABEL if modules is None else f"{MODULE_LABEL} in ({','.join(sorted(modules))})"
    cache = {"resource_version": "0"} if from_cache else {}
    raw = res.get(label_selector=selector, serialize=False, header_params=header, **cache)
    return json.loads(raw.data).get("items") or []


class Pruning(Removal):
    """Pruning what a module's run no longer makes (:meth:`prune_run`)."""

    def prune_inventory(self, recorded: Iterable[Iterable[str]], current: Iterable[Iterable[str]],
                        propagation: str = "Background", timeout: int | None = None) -> ApplyResult:
        """Delete what the module's recorded inventory has and its run's inventory (``current``) lacks
        (:func:`stale_refs`), last stage first, through the deletion policy; a Secret a task generated (never
        applied from a render: a credential, a certificate) is kept too. What is kept stays in the inventory
        (``survivors``). With ``timeout``, wait until the deleted objects are gone (with ``Foreground``: their
        pods too)."""
        result = ApplyResult()
        owned = sorted(self._owned_refs(stale_refs(recorded, current), result), key=uninstall_order)
        for obj in owned:
            annotations = obj["metadata"].get("annotations") or {}
            if obj["kind"] == "Secret" and APPLIED_ANNOTATION not in annotations:
                self._keep(obj, result, "generated")
                continue
            if prune_disabled(obj):
                self._keep(obj, result, PRUNE_KEPT)
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
        serves: one metadata-only list per kind (side by side), for all modules at once (a reconcile that installs
        several modules reads it once: installer.engine.runner)."""
        found: dict[str, list[Ref]] = {}
        kinds = sorted(self._served_kinds())
        listed = side_by_side(lambda kind: self._labelled_of(*kind), kinds)
        for (api_version, kind), items in zip(kinds, listed, strict=True):
            for meta in items:
                if installer_managed(meta):
                    module = (meta.get("labels") or {}).get(MODULE_LABEL, "")
                    found.setdefault(module, []).append((api_version, kind, meta.get("namespace") or "",
                                                         meta["name"]))
        return found

    def _labelled_of(self, api_version: str, kind: str) -> list[Obj]:
        """The metadata of every object of a kind that carries a module's label (none: the kind is not served)."""
        try:
            return [item["metadata"] for item in labelled_items(self._resource(api_version, kind))]
        except (NotFoundError, ResourceNotFoundError, ApiException):  # kind not served: nothing to find
            return []

    def labelled_refs(self, labelled: dict[str, list[Ref]] | None = None) -> list[Ref]:
        """The module's objects found by its label over every kind the API serves (those the installer applied and
        that lie in its namespaces; ``labelled``: :meth:`labelled`, read already): what an install prunes besides
        its recorded inventory, so that what an earlier installation of the module left in its namespaces when its
        record was lost (a forgotten state) goes too. Never a cluster-scoped object: a label and a field manager's
        name are all that would say it is the module's, and anyone who can write it can set both."""
        found = (self.labelled() if labelled is None else labelled).get(self.module, [])
        return [ref for ref in found if ref[2] and why_spared(self.module, ref, self.namespaces) is None]

    def prune_base(self, recorded: Iterable[Iterable[str]], install: bool,
                   labelled: dict[str, list[Ref]] | None = None) -> list[Ref]:
        """What a run's prune compares with its inventory: the recorded inventory, and for an install the module's
        labelled objects too (:meth:`labelled_refs`; one reference per object whatever its API version)."""
        base = [tuple(r) for r in recorded]
        if install:
            known = {group_key(r) for r in base}  # type: ignore[arg-type]
            base += [r for r in self.labelled_refs(labelled) if group_key(r) not in known]
        return base  # type: ignore[return-value]

    def prune_run(self, recorded: Iterable[Iterable[str]], current: Iterable[Iterable[str]], install: bool,
                  labelled: dict[str, list[Ref]] | None = None) -> ApplyResult | None:
        """The prune after a module's successful run (a preview's: what it would delete): what the recorded inventory
        (for an install, with the module's labelled objects: :meth:`prune_base`) has and the run's inventory
        (``current``) lacks, through the deletion policy (:meth:`prune_inventory`); None when it lacks nothing."""
        base = self.prune_base(recorded, install, labelled)
        if not stale_refs(base, current):
            return None
        return self.prune_inventory(base, current)
