"""Warnings about valid specs that do not do what a user likely expects (reported, never refused)."""

from __future__ import annotations

from typing import Any

from installer.modules import LOG_CONSUMERS
from installer.spec import get


def _names(users: list[str], one: str = "writes", many: str = "write") -> str:
    return f"{', '.join(users)} {one if len(users) == 1 else many}"


def warnings(spec: dict[str, Any]) -> list[str]:
    """What the log, the cc status and ``plan`` tell the user about ``spec``."""
    return _edge_runtime(spec) + _log_store(spec)


def _edge_runtime(spec: dict[str, Any]) -> list[str]:
    """KubeEdge is installed only with both switches on, as upstream; one alone changes kubesphere.yaml only."""
    if get(spec, "edgeruntime.enabled") is True and get(spec, "edgeruntime.kubeedge.enabled") is not True:
        return ["edgeruntime.enabled is true but edgeruntime.kubeedge.enabled is not: KubeEdge is not installed "
                "(set both to true)"]
    return []


def _log_store(spec: dict[str, Any]) -> list[str]:
    users = [u for u in LOG_CONSUMERS if get(spec, f"{u}.enabled") is True]
    if not users:
        return []
    external = get(spec, "common.es.externalElasticsearchHost") or get(spec, "common.opensearch.externalOpensearchHost")
    if get(spec, "common.es.enabled") is True and not get(spec, "common.es.externalElasticsearchHost"):
        return [f"{_names(users)} to Elasticsearch (common.es.enabled), but KubeSphere v3.4 ships no "
                "Elasticsearch server and common.es.externalElasticsearchHost is not set: nothing stores their "
                "data; set the external host, or use common.opensearch instead"]
    if get(spec, "common.opensearch.enabled") is not True and get(spec, "common.es.enabled") is not True \
            and not external:
        return [f"{_names(users, 'needs', 'need')} a log store, but common.opensearch.enabled and "
                "common.es.enabled are false and no external host is set: nothing stores their data"]
    return []
