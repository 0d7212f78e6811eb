"""The schedule binding's quick decision (installer.engine.fastpath.settle): what a minute's tick leaves alone."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from installer.engine.fastpath import PATCH_ENV, settle
from installer.engine_settings import Settings
from installer.settings import MEMBERS_JOINED


def _contexts(reason: str) -> list[dict]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"lastDriftCheck": now, "conditions": [{"type": "Stalled", "status": "True", "reason": reason}]}
    cc = {"metadata": {"name": "ks-installer", "generation": 3}, "spec": {}, "status": status}
    return [{"binding": "schedule", "snapshots": {"cc": [{"object": cc}]}}]


@pytest.mark.parametrize("reason, settled", [("InvalidSpec", True), (MEMBERS_JOINED, False)])
def test_a_refusal_that_depends_on_the_cluster_is_checked_again(reason: str, settled: bool, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec error stays until the spec changes; member clusters can be removed without touching the cc, so
    a host -> none change refused for them is tried again on the next tick."""
    monkeypatch.setenv(PATCH_ENV, str(tmp_path / "patch"))
    monkeypatch.setenv("KS_BASE_DIR", str(tmp_path))
    assert settle(_contexts(reason), True, "cc", "state", Settings.from_env()) is settled
