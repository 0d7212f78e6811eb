"""The decision behind a generated credential's Secret (installer.objects.random_secret.planned_secret), which the run
and ``plan --objects`` share: created once, a missing key added, labels set, a found value kept or refused."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from installer.objects.credentials import Refused
from installer.objects.random_secret import planned_secret
from installer.settings import MANAGED_BY, MODULE_LABEL


def _found(data: dict[str, str], labels: dict[str, str] | None = None, type_: str = "Opaque") -> dict[str, Any]:
    return {"type": type_, "metadata": {"name": "redis-secret", "namespace": "ns", "labels": labels},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def _decide(live: dict[str, Any] | None) -> tuple[Any, dict[str, Any] | None]:
    return planned_secret(live, "ns", "redis-secret", "auth", "redis", 15)


def test_an_absent_secret_is_created_with_a_random_value() -> None:
    outcome, body = _decide(None)
    assert outcome.created == ["Secret/ns/redis-secret"] and outcome.changed
    assert body is not None and body["metadata"]["labels"] == {**MANAGED_BY, MODULE_LABEL: "redis"}
    value = base64.b64decode(body["data"]["auth"]).decode()
    assert len(value) == 15 and value.isalpha()
    assert _decide(None)[1]["data"]["auth"] != body["data"]["auth"]  # random each time


def test_a_found_value_is_kept_and_only_labels_are_added() -> None:
    outcome, body = _decide(_found({"auth": "s3cret", "other": "x"}))
    assert outcome.labelled and not outcome.added_keys and not outcome.created
    assert body is not None and body["data"] == _found({"auth": "s3cret", "other": "x"})["data"]


def test_a_labelled_secret_holding_the_key_is_left_alone() -> None:
    outcome, body = _decide(_found({"auth": "s3cret"}, {**MANAGED_BY, MODULE_LABEL: "redis"}))
    assert not outcome.changed and body is None


def test_a_missing_key_is_added_beside_the_found_ones() -> None:
    outcome, body = _decide(_found({"other": "x"}, {**MANAGED_BY, MODULE_LABEL: "redis"}))
    assert outcome.added_keys == ["auth"] and not outcome.labelled
    assert body is not None and set(body["data"]) == {"auth", "other"}


@pytest.mark.parametrize(("live", "rule"), [
    (_found({"auth": ""}), "key 'auth' is empty"),
    (_found({"auth": "x"}, type_="kubernetes.io/basic-auth"), "its type is 'kubernetes.io/basic-auth', not Opaque"),
])
def test_a_found_secret_it_cannot_use_is_refused_by_name(live: dict[str, Any], rule: str) -> None:
    with pytest.raises(Refused) as refused:
        _decide(live)
    assert str(refused.value).startswith("Secret ns/redis-secret: ") and rule in str(refused.value)
