"""Status keys: a parent cleared with (or before) its nested keys stays removed; a failed first install's
message goes once the component is enabled."""

from __future__ import annotations

from typing import Any

import pytest

from installer.engine.status import StatusWriter


class Sink:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    def patch_status(self, status: dict[str, Any]) -> None:
        self.patches.append(status)


@pytest.mark.parametrize("keys, patch", [
    (["events", "events.ruler"], {"events": None}),  # a parent cleared first is not brought back by its child
    (["events.ruler", "events"], {"events": None}),  # a child cleared first is replaced by the parent's removal
    (["network.topology"], {"network": {"topology": None}}),  # a child alone is cleared under its parent
])
def test_cleared_keys(keys: list[str], patch: dict[str, Any]) -> None:
    sink = Sink()
    writer = StatusWriter(sink, {})
    for key in keys:
        writer.cleared(key)
    writer.flush()
    assert sink.patches == [patch]


def test_enabled_after_failed_drops_the_message() -> None:
    sink = Sink()
    writer = StatusWriter(sink, {})
    writer.failed("servicemesh", "Deployment istio-system/istiod-1-14-6 not ready")
    writer.flush()
    writer.enabled("servicemesh")
    writer.flush()
    assert sink.patches[0] == {"servicemesh": {"status": "failed",
                                               "message": "Deployment istio-system/istiod-1-14-6 not ready"}}
    assert sink.patches[1]["servicemesh"]["status"] == "enabled" and sink.patches[1]["servicemesh"]["message"] is None
