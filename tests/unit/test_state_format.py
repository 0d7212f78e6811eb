"""The state Secret's format: an older installer's entries are upgraded step by step, a newer one's refused."""

from __future__ import annotations

import base64

import pytest

from installer.engine import state_codec
from installer.engine.state_codec import FORMAT, StateTooNew, StateUnreadable, encode, parse, upgraded

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


DEEP = "[" * 100_000 + "]" * 100_000


def raw(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(("data", "message"), [
    ({"redis": raw('{"module":"redis","hash":"h","inputs":{"a":' + DEEP + '}}')},
     r"key 'redis': ValueError: inputs\.a\[0\]\[0\].*nested deeper than 64 levels"),
    ({"_spec": raw('{"a":' + DEEP + '}')}, r"key '_spec': ValueError: a\[0\].*nested deeper than 64 levels"),
    ({"redis": raw("[" * 5000)}, r"key 'redis': JSONDecodeError: unterminated nesting"),
    ({"redis": encode({**RECORD, "inventory": "ConfigMap/default/x"})}, r"inventory: expected a list, got a string"),
    ({"redis": encode({**RECORD, "inventory": [["v1", "ConfigMap", "default"]]})}, r"inventory\[0\]: expected"),
    ({"redis": encode({**RECORD, "applied_at": "yesterday"})}, r"applied_at: not an RFC 3339 time"),
    ({"redis": encode({**RECORD, "applied_at": 5})}, r"applied_at: expected a string, got a number"),
    ({"redis": encode({**RECORD, "inputs": ["a"]})}, r"inputs: expected an object"),
    ({"redis": encode({**RECORD, "module": "minio"})}, r"module: 'minio' is not the entry's key"),
    ({"redis": encode({**RECORD, "extra": 1})}, r"unknown field 'extra'"),
    ({"redis": encode({**RECORD, "intent": {"action": "rm -rf", "hash": None, "started_at": "2024-01-01T00:00:00Z"}})},
     r"intent\.action: must be one of"),
    ({"redis": encode({**RECORD, "intent": {"action": "install", "hash": None, "started_at": "soon"}})},
     r"intent\.started_at: not an RFC 3339 time"),
    ({"redis": encode({**RECORD, "inputs": {"a": "x" * 10_000}})}, r"inputs\.a: is too long"),
    ({"redis": encode([1] * 30_000)}, r"is too large: more than 20000 values"),
    ({"redis": "A" * (state_codec.MAX_ENTRY + 4)}, r"too large: \d+ characters"),
])
def test_an_odd_entry_is_unreadable_with_a_message_never_a_crash(data: dict, message: str) -> None:
    with pytest.raises(StateUnreadable, match=message):
        parse(data, REF)


def test_a_well_formed_record_reads_every_field() -> None:
    entry = {**RECORD, "applied_at": "2024-01-01T00:00:00Z", "version": "3.4.1",
             "inventory": [["v1", "ConfigMap", "kubesphere-system", "a"],
                           ["rbac.authorization.k8s.io/v1", "ClusterRole", "", "system:kubesphere-router-clusterrole"]],
             "intent": {"action": "upgrade", "hash": "h2", "started_at": "2024-01-02T00:00:00Z", "outcome": "failed"}}
    record = parse({"redis": encode(entry)}, REF)[0]["redis"]
    assert len(record.inventory) == 2 and record.intent.outcome == "failed"


def test_a_forged_writer_is_quoted_in_the_downgrade_message() -> None:
    with pytest.raises(StateTooNew) as caught:
        parse({"_format": encode(FORMAT + 1), "_writer": encode("1.0\n[error] forged\x1b[31m")}, REF)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)
    assert '"1.0\\n[error] forged\\u001b[31m"' in str(caught.value)
