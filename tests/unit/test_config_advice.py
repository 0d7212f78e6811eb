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
