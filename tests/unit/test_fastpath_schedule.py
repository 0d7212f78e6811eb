"""The schedule binding's quick decision (installer.engine.fastpath.settle): what a minute's tick leaves alone."""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path

import pytest

from installer.engine.fastpath import PATCH_ENV, settle
from installer.engine.planning import STATE_TOO_NEW, STATE_UNREADABLE
from installer.engine.state_codec import encode
from installer.engine_settings import Settings
from installer.settings import MEMBERS_JOINED


def _contexts(reason: str, state: dict[str, str] | None = None) -> list[dict]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"lastDriftCheck": now, "conditions": [{"type": "Stalled", "status": "True", "reason": reason}]}
    cc = {"metadata": {"name": "ks-installer", "generation": 3}, "spec": {}, "status": status}
    snapshots: dict[str, list[dict]] = {"cc": [{"object": cc}]}
    if state is not None:
        snapshots["state"] = [{"object": {"metadata": {"resourceVersion": "7"}, "data": state}}]
    return [{"binding": "schedule", "snapshots": snapshots}]


@pytest.mark.parametrize("reason, settled", [("InvalidSpec", True), (MEMBERS_JOINED, False),
                                             (STATE_UNREADABLE, False), (STATE_TOO_NEW, False)])
def test_a_refusal_that_depends_on_the_cluster_is_checked_again(reason: str, settled: bool, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec error stays until the spec changes; member clusters can be removed without touching the cc, so
    a host -> none change refused for them is tried again on the next tick."""
    monkeypatch.setenv(PATCH_ENV, str(tmp_path / "patch"))
    monkeypatch.setenv("KS_BASE_DIR", str(tmp_path))
    assert settle(_contexts(reason), True, "cc", "state", Settings.from_env()) is settled


@pytest.mark.parametrize("data, settled", [
    ({"redis": encode({"module": "redis", "hash": "h", "inputs": {}})}, True),
    ({"redis": encode({"module": "redis", "hash": "h", "inputs": {}, "inventory": "everything"})}, False),
    ({"_spec": encode({"common": functools.reduce(lambda inner, _: [inner], range(100), [])})}, False),
], ids=["readable", "wrong-type", "too-deep"])
def test_a_state_that_does_not_read_goes_to_the_full_path(data: dict[str, str], settled: bool, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The full path reports it (Stalled, StateUnreadable) as an edit does, rather than wait for an edit."""
    monkeypatch.setenv(PATCH_ENV, str(tmp_path / "patch"))
    monkeypatch.setenv("KS_BASE_DIR", str(tmp_path))
    assert settle(_contexts("InvalidSpec", data), True, "cc", "state", Settings.from_env()) is settled
