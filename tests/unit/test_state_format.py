"""The state Secret's format: an older installer's entries are upgraded step by step, a newer one's refused."""

from __future__ import annotations

import pytest

from installer import state_codec
from installer.state_codec import FORMAT, StateTooNew, StateUnreadable, encode, parse, upgraded

REF = "Secret kubesphere-system/ks-installer-state"
RECORD = {"module": "redis", "hash": "h1", "inputs": {"common.redis.enabled": True}}


def test_a_secret_without_a_format_is_the_first_format_and_reads_as_before() -> None:
    records, spec = parse({"redis": encode(RECORD), "_spec": encode({"a": 1})}, REF)
    assert records["redis"].hash == "h1" and spec == {"a": 1}


def test_older_formats_go_through_every_upgrade_step_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    def rename(entries: dict) -> dict:
        return {k: {**v, "hash": v["hash"] + "+2"} if not k.startswith("_") else v for k, v in entries.items()}

    def mark(entries: dict) -> dict:
        return {k: {**v, "hash": v["hash"] + "+3"} if not k.startswith("_") else v for k, v in entries.items()}

    monkeypatch.setattr(state_codec, "FORMAT", 3)
    monkeypatch.setattr(state_codec, "UPGRADES", {1: rename, 2: mark})
    assert upgraded({"redis": encode(RECORD)}, REF)["redis"]["hash"] == "h1+2+3"
    assert upgraded({"redis": encode(RECORD), "_format": encode(2)}, REF)["redis"]["hash"] == "h1+3"


def test_a_newer_installers_state_is_refused_with_its_version() -> None:
    with pytest.raises(StateTooNew, match=r"written by ks-installer 9\.9\.9 in state format 7.*downgrade is refused"):
        parse({"redis": encode(RECORD), "_format": encode(FORMAT + 5), "_writer": encode("9.9.9")}, REF)


@pytest.mark.parametrize("value", [encode("two"), encode(0), encode(True), "%%%"])
def test_a_format_that_is_no_number_is_unreadable(value: str) -> None:
    with pytest.raises(StateUnreadable, match="key '_format'") as caught:
        parse({"_format": value}, REF)
    assert not isinstance(caught.value, StateTooNew)
