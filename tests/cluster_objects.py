"""What the installer applied, as the cluster shows it: every object carrying the module label."""

from __future__ import annotations

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from installer.settings import MODULE_LABEL

KINDS = (
    ("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("v1", "ServiceAccount"),
    ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"), ("apps/v1", "StatefulSet"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("monitoring.coreos.com/v1", "Prometheus"), ("monitoring.coreos.com/v1", "Alertmanager"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule"),
)


def labelled_objects(api: client.ApiClient) -> dict[str, dict[str, str]]:
    """``{module: {"Kind/namespace/name": resourceVersion}}`` for every labelled object of the common kinds."""
    dyn = DynamicClient(api)
    out: dict[str, dict[str, str]] = {}
    for api_version, kind in KINDS:
        try:
            items = dyn.resources.get(api_version=api_version, kind=kind).get(label_selector=MODULE_LABEL).items
        except (ResourceNotFoundError, NotFoundError):  # CRDs not installed yet, or just deleted
            continue
        for item in items:
            meta = item.metadata
            key = f"{kind}/{meta.namespace or ''}/{meta.name}"
            out.setdefault(meta.labels[MODULE_LABEL], {})[key] = meta.resourceVersion
    return out
