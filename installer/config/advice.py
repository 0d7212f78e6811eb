"""Warnings about valid specs that do not do what a user likely expects (reported, never refused)."""

from __future__ import annotations

from typing import Any

from installer.log_store import external_store, store_kind
from installer.modules import LOG_CONSUMERS
from installer.spec import get


def _names(users: list[str], one: str = "writes", many: str = "write") -> str:
    return f"{', '.join(users)} {one if len(users) == 1 else many}"


def warnings(spec: dict[str, Any], status: object = None) -> list[str]:
    """What the log, the cc status and ``plan`` tell the user about ``spec`` (``status``: the cc's)."""
    return _edge_runtime(spec) + _log_store(spec, status)


def _edge_runtime(spec: dict[str, Any]) -> list[str]:
    """KubeEdge is installed only with both switches on, as upstream; one alone changes kubesphere.yaml only."""
    if get(spec, "edgeruntime.enabled") is True and get(spec, "edgeruntime.kubeedge.enabled") is not True:
        return ["edgeruntime.enabled is true but edgeruntime.kubeedge.enabled is not: KubeEdge is not installed "
                "(set both to true)"]
    return []


def _elasticsearch_runs(status: object) -> bool:
    """The cc's status says an in-cluster Elasticsearch runs (``status.es``: a 3.3.x installation's, which the ES
    path keeps writing to at elasticsearch-logging-data)."""
    es = status.get("es") if isinstance(status, dict) else None
    return isinstance(es, dict) and es.get("status") == "enabled"


def _log_store(spec: dict[str, Any], status: object = None) -> list[str]:
    """The log store the run uses (installer.log_store.store_kind) must be there for the consumers that are on."""
    users = [u for u in LOG_CONSUMERS if get(spec, f"{u}.enabled") is True]
    if not users:
        return []
    common = get(spec, "common") or {}
    if store_kind(common) == "es":
        if external_store(common) or _elasticsearch_runs(status):
            return []
        return [f"{_names(users)} to Elasticsearch (common.es.enabled), but KubeSphere v3.4 ships no "
                "Elasticsearch server, common.es.externalElasticsearchHost is not set and status.es names none "
                "that runs: nothing stores their data; set the external host, or use common.opensearch instead"]
    if get(spec, "common.opensearch.enabled") is not True and not external_store(common):
        return [f"{_names(users, 'needs', 'need')} a log store, but common.opensearch.enabled and "
                "common.es.enabled are false and no external host is set: nothing stores their data"]
    return []
