"""Where each module's objects may live: the only namespaces from which its prune and uninstall delete anything.

A module's uninstall (and the prune after its run) deletes an object of its recorded inventory only when it still
carries the module's label, was written by the installer's field manager and lies in one of the module's namespaces
(the registry's ``Module.namespaces``, which the engine hands each run: :data:`NAMESPACES_ENV`), or is cluster-scoped.
The label and the field manager can be forged by anyone who can write the object (and the inventory by anyone who can
write the installer's state); the registry cannot: a ConfigMap in ``default`` is
never deleted, whatever labels claim it. A Namespace object itself is deleted only when it is one of its module's
namespaces and none of :data:`PROTECTED`.
"""

from __future__ import annotations

import json
import os

from installer.settings import NAMESPACE

NAMESPACES_ENV = "KS_MODULE_NAMESPACES"
"""The running module's namespaces (a JSON list), handed to its run by the engine from the registry: the Ansible side
reads them as run data, so a registry edit does not change every module's code digest."""

TENANT_KINDS_ENV = "KS_MODULE_TENANT_KINDS"
"""The running module's ``Module.tenant_kinds`` (a JSON list), handed to its run as :data:`NAMESPACES_ENV` is."""

#: Namespaces no module ever deletes (the cluster's own, and the installer's).
PROTECTED = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", NAMESPACE})

Ref = tuple[str, str, str, str]


def run_namespaces() -> frozenset[str] | None:
    """The running module's namespaces (:data:`NAMESPACES_ENV`); None outside a module's run."""
    raw = os.environ.get(NAMESPACES_ENV)
    return frozenset(json.loads(raw)) if raw else None


def run_tenant_kinds() -> tuple[str, ...]:
    """The running module's tenant kinds (:data:`TENANT_KINDS_ENV`); none outside a module's run."""
    raw = os.environ.get(TENANT_KINDS_ENV)
    return tuple(json.loads(raw)) if raw else ()


def why_spared(module: str, ref: Ref, spaces: frozenset[str] | None) -> str | None:
    """Why ``module`` (whose namespaces are ``spaces``; None: not known, as for an object set no module of the
    registry makes) must not delete ``ref`` although it carries the module's label, or None when it may."""
    _, kind, namespace, name = ref
    if spaces is not None:
        if namespace and namespace not in spaces:
            return f"namespace {namespace} is not one of module {module}'s"
        if kind == "Namespace" and not namespace and (name in PROTECTED or name not in spaces):
            return f"namespace {name} is not one module {module} may delete"
    return None
