"""Where each module's objects may live: the only namespaces from which its prune and uninstall delete anything.

A module's uninstall (and the prune after its run) deletes an object of its recorded inventory only when it still
carries the module's label, was written by the installer's field manager and lies in one of the module's namespaces
below (or is cluster-scoped). The label and the field manager can be forged by anyone who can write the object
(and the inventory by anyone who can write the installer's state); this table cannot: a ConfigMap in ``default`` is
never deleted, whatever labels claim it. A Namespace object itself is deleted only when it is one of its module's
namespaces and none of :data:`PROTECTED`.
"""

from __future__ import annotations

from installer.settings import NAMESPACE

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


def why_spared(module: str, ref: Ref) -> str | None:
    """Why ``module`` must not delete ``ref`` although it carries the module's label, or None when it may."""
    _, kind, namespace, name = ref
    spaces = MODULE_NAMESPACES.get(module)
    if spaces is not None:
        if namespace and namespace not in spaces:
            return f"namespace {namespace} is not one of module {module}'s"
        if kind == "Namespace" and not namespace and (name in PROTECTED or name not in spaces):
            return f"namespace {name} is not one module {module} may delete"
    return None
