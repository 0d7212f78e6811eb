"""Jinja filters of the opensearch role."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from installer.objects.claims import live_claim


def ks_opensearch_live_claims(results: list[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Per node group, the live claim found by the lookups of tasks/main.yaml (each loop result has the
    ``item.group`` it was for and the ``resources`` found, StatefulSet first); groups without one are left out."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for result in results:
        group = (result.get("item") or {}).get("group")
        if group:
            found.setdefault(group, []).extend(result.get("resources") or [])
    claims = {group: live_claim(objects) for group, objects in found.items()}
    return {group: claim for group, claim in claims.items() if claim}


def ks_opensearch_replicas(group: str, node_num: Any) -> int:
    """Upstream's default replicas by node count: master 1 below 5 nodes, else 3; data 1 on one node, 2 on 2-4,
    else 3. An unknown node count gives 3 (upstream's templates took the ``else`` branch)."""
    try:
        nodes: int | None = None if isinstance(node_num, bool) else int(node_num)
    except (TypeError, ValueError):
        nodes = None
    if group == "master":
        return 1 if nodes is not None and nodes < 5 else 3
    if nodes == 1:
        return 1
    return 2 if nodes is not None and 1 < nodes < 5 else 3


def ks_opensearch_container_port(port: Mapping[str, Any]) -> dict[str, Any]:
    """A Service port (``name``, ``port``) as the container port of the same name."""
    return {"name": port["name"], "containerPort": port["port"]}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_opensearch_live_claims": ks_opensearch_live_claims,
                "ks_opensearch_replicas": ks_opensearch_replicas,
                "ks_opensearch_container_port": ks_opensearch_container_port}
