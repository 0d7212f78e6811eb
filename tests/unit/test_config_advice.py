"""Warnings for valid specs that do not do what a user likely expects."""

from __future__ import annotations

from installer.config import prepare
from installer.modules import switch_paths


def warnings_of(spec: dict) -> list[str]:
    prepared = prepare(spec, None, switch_paths())
    assert not prepared.errors
    return prepared.warnings


def test_edge_runtime_needs_both_switches() -> None:
    (warning,) = warnings_of({"edgeruntime": {"enabled": True}})
    assert "edgeruntime.kubeedge.enabled" in warning and "not installed" in warning
    assert warnings_of({"edgeruntime": {"enabled": True, "kubeedge": {"enabled": True}}}) == []
    assert warnings_of({"edgeruntime": {"enabled": False}}) == []


def test_log_store_warning_names_every_consumer_that_is_on() -> None:
    no_store = {"common": {"opensearch": {"enabled": False}}}
    (warning,) = warnings_of({**no_store, "logging": {"enabled": True}, "servicemesh": {"enabled": True}})
    assert warning.startswith("logging, servicemesh need a log store")
    (warning,) = warnings_of({**no_store, "events": {"enabled": True}})
    assert warning.startswith("events needs a log store")
    assert warnings_of({"logging": {"enabled": True}}) == []  # the default OpenSearch stores it
