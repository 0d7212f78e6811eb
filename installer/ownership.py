"""Where each module's objects may live: the only namespaces from which its prune and uninstall delete anything.

A module's uninstall (and the prune of an upgrade) deletes an object only when it carries the module's label, was
written by the installer's field manager and lies in one of the module's namespaces below (or is cluster-scoped).
The first two can be forged by anyone who can write the object; this table cannot: a ConfigMap in ``default`` is
never deleted, whatever labels claim it. A Namespace object itself is deleted only when it is one of its module's
namespaces and none of :data:`PROTECTED`. The recorded inventory (``KS_RECORDED_INVENTORY``) is handed to each run
but does not bound the prune: records of runs that applied objects conditionally lack some of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from installer.settings import NAMESPACE

RECORDED_ENV = "KS_RECORDED_INVENTORY"
"""A JSON file: the module's recorded inventory, ``[[apiVersion, kind, namespace, name], ...]``."""

_LOGGING, _MONITORING = "kubesphere-logging-system", "kubesphere-monitoring-system"

#: The namespaces each module renders objects into (checked against every module's render and upstream's objects by
#: tests/unit/test_ownership.py).
MODULE_NAMESPACES: dict[str, frozenset[str]] = {name: frozenset(spaces) for name, spaces in {
    "preinstall": ("kube-system", NAMESPACE, "kubesphere-controls-system", _MONITORING,
                   "kubesphere-monitoring-federated"),
    "metrics_server": ("kube-system",),
    "redis": (NAMESPACE,),
    "openldap": (NAMESPACE,),
    "minio": (NAMESPACE,),
    "opensearch": (_LOGGING,),
    "fluentbit": (_LOGGING,),
    "ks-core": (NAMESPACE, "kubesphere-controls-system"),
    "ks-config": (NAMESPACE,),
    "monitoring": (_MONITORING, "kube-system", "istio-system"),
    "alerting": (_MONITORING,),
    "auditing": (_LOGGING,),
    "devops": ("kubesphere-devops-system", "kubesphere-devops-worker", "argocd", _MONITORING),
    "events": (_LOGGING,),
    "logging": (_LOGGING,),
    "multicluster": ("kube-federation-system", NAMESPACE, "kubesphere-monitoring-federated", "kube-system"),
    "network": ("weave",),
    "openpitrix": (NAMESPACE,),
    "servicemesh": ("istio-system",),
    "edgeruntime": ("kubeedge",),
    "gatekeeper": ("gatekeeper-system",),
    "telemetry": (),
}.items()}

#: Namespaces no module ever deletes (the cluster's own, and the installer's).
PROTECTED = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", NAMESPACE})

Ref = tuple[str, str, str, str]


def _group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def key(ref: Iterable[str]) -> tuple[str, str, str, str]:
    """``(group, kind, namespace, name)``: an object whatever version of its kind named it."""
    api_version, kind, namespace, name = ref
    return _group(api_version), kind, namespace or "", name


def recorded() -> set[tuple[str, str, str, str]] | None:
    """The recorded inventory the engine handed this run (:func:`key` of each), or None when there is none (the
    engine always hands one; a direct call of installer.manifests, as in tests, has none)."""
    path = os.environ.get(RECORDED_ENV)
    if not path:
        return None
    with open(path, encoding="utf-8") as src:
        return {key(ref) for ref in json.load(src)}


def why_spared(module: str, ref: Ref, inventory: set[tuple[str, str, str, str]] | None) -> str | None:
    """Why ``module`` must not delete ``ref`` although it carries the module's label, or None when it may."""
    _, kind, namespace, name = ref
    spaces = MODULE_NAMESPACES.get(module)
    if spaces is not None:
        if namespace and namespace not in spaces:
            return f"namespace {namespace} is not one of module {module}'s"
        if kind == "Namespace" and not namespace and (name in PROTECTED or name not in spaces):
            return f"namespace {name} is not one module {module} may delete"
    return None
