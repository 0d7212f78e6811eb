"""Jinja filters for the ks-monitor role."""

from __future__ import annotations

import ipaddress
from typing import Any


def ks_split(value: Any) -> list[str]:
    """``"10.0.0.1, 10.0.0.2"`` → ``["10.0.0.1", "10.0.0.2"]`` (a list is taken as is)."""
    items = value if isinstance(value, list) else str(value or "").split(",")
    return [str(i).strip() for i in items if str(i).strip()]


def ks_bad_endpoint_ips(value: Any) -> list[str]:
    """Entries an Endpoints object rejects: anything but a unicast IP outside loopback and link-local."""
    bad = []
    for entry in ks_split(value):
        try:
            ip = ipaddress.ip_address(entry)
        except ValueError:
            bad.append(entry)
            continue
        if ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified:
            bad.append(entry)
    return bad


def ks_gpu_nodes(nodes: Any, resource: str = "nvidia.com/gpu") -> list[str]:
    """Names of the Nodes whose allocatable resources name ``resource`` (upstream's go-template
    ``index .status.allocatable "nvidia.com/gpu"``: any non-empty quantity, "0" included)."""
    names = []
    for node in nodes or []:
        allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
        if str(allocatable.get(resource) or ""):
            names.append(node["metadata"]["name"])
    return sorted(names)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_split": ks_split, "ks_bad_endpoint_ips": ks_bad_endpoint_ips, "ks_gpu_nodes": ks_gpu_nodes}
