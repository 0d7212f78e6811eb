"""A host cluster stops being one (``multicluster.clusterRole: host`` → ``none``/``member``) only when no member
cluster is joined to it: the member clusters' Cluster objects, their federated resources and the console's view
of them would otherwise be cut off (kubesphere/kubesphere#4229)."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.config import SpecError
from installer.spec import get

HOST_LABEL = "cluster-role.kubesphere.io/host"
"""The label ks-controller-manager puts on the Cluster object of the host itself."""


def joined_members(api: client.ApiClient) -> list[str]:
    """Names of the Cluster objects (clusters.cluster.kubesphere.io) other than the host's own."""
    try:
        found = client.CustomObjectsApi(api).list_cluster_custom_object(
            "cluster.kubesphere.io", "v1alpha1", "clusters", label_selector=f"!{HOST_LABEL}")
    except ApiException as exc:
        if exc.status == 404:  # the kind is not served: nothing can be joined
            return []
        raise
    return sorted(item["metadata"]["name"] for item in found.get("items", []))


def leaves_host(applied: dict[str, Any] | None, spec: dict[str, Any]) -> str | None:
    """The role a host → none/member change goes to (``None`` for any other change)."""
    before = get(applied, "multicluster.clusterRole", "none")
    after = get(spec, "multicluster.clusterRole", "none")
    return None if before != "host" or after == "host" else str(after)


def offline_caveat(applied: dict[str, Any] | None, spec: dict[str, Any]) -> str | None:
    """What a plan made without the cluster must say of a host → none/member change: whether it goes ahead
    depends on member clusters that only the cluster knows of."""
    after = leaves_host(applied, spec)
    if after is None:
        return None
    return (f'multicluster.clusterRole: "host" -> "{after}" will be refused if member clusters are joined to this '
            "host (a plan without the cluster cannot see them; `python -m installer plan` against it can)")


def role_change_errors(api: client.ApiClient, applied: dict[str, Any] | None, spec: dict[str, Any]) -> list[SpecError]:
    """The refusal of a host → none/member change while member clusters are joined (else nothing)."""
    after = leaves_host(applied, spec)
    if after is None:
        return []
    members = joined_members(api)
    if not members:
        return []
    return [SpecError("multicluster.clusterRole",
                      f'cannot change from "host" to "{after}" while member clusters are joined to this host '
                      f"({', '.join(members)}): remove them first (Cluster Management in the console, or "
                      "`kubectl delete clusters.cluster.kubesphere.io <name>`; the change then goes ahead within "
                      'a minute), or set it back to "host"')]
