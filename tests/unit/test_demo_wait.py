"""`hack/demo.sh up`'s wait (hack/demo.py): the welcome box waits for the reconcile of the cc's current generation by
the shell-operator the demo runs, never for a Ready True an earlier operator or an older generation left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from demo import new_pod, reconciled

STARTED = 1_800_000_000.0  # when the demo's shell-operator started (epoch seconds)
AFTER, BEFORE = "2027-01-15T08:00:10.000000Z", "2027-01-15T07:59:50.000000Z"  # STARTED is 08:00:00 UTC
RELEASED = {"acquireTime": AFTER, "holderIdentity": None}


def _cc(generation: int, ready: str = "True", at: int | None = None, observed: int | None = None,
        reconciling: str = "False") -> dict[str, Any]:
    at = generation if at is None else at
    return {"metadata": {"generation": generation},
            "status": {"observedGeneration": at if observed is None else observed, "conditions": [
                {"type": "Ready", "status": ready, "observedGeneration": at},
                {"type": "Reconciling", "status": reconciling}]}}


def test_the_reconcile_of_the_current_generation_by_this_operator_counts() -> None:
    assert reconciled(_cc(3), RELEASED, STARTED)
    assert reconciled(_cc(3, ready="False"), RELEASED, STARTED)  # finished, not Ready: the demo reports why


def test_a_ready_the_running_operator_did_not_write_does_not_count() -> None:
    # The cc as a restarted operator finds it: Ready True, by the operator before (the Lease taken before it started).
    assert not reconciled(_cc(3), {"acquireTime": BEFORE}, STARTED)
    assert not reconciled(_cc(3), {}, STARTED)  # no reconcile yet
    assert not reconciled(_cc(3), {"acquireTime": AFTER, "holderIdentity": "ks-installer-x"}, STARTED)  # runs


def test_a_ready_of_an_older_generation_does_not_count() -> None:
    assert not reconciled(_cc(4, at=3), RELEASED, STARTED)  # edited, no run has seen it: READY still True
    # The hook's first step: Ready Unknown at the new generation, the reconciled one still 3.
    assert not reconciled(_cc(4, ready="Unknown", observed=3), RELEASED, STARTED)
    assert not reconciled(_cc(4, ready="Unknown", reconciling="True"), RELEASED, STARTED)  # modules run
    assert not reconciled({"metadata": {"generation": 1}}, RELEASED, STARTED)  # no status yet


def test_a_new_operator_starts_as_a_new_pod(tmp_path: Path) -> None:
    welcome = tmp_path / "kubesphere" / "playbooks" / "kubesphere_running"
    welcome.parent.mkdir(parents=True)
    welcome.write_text("Welcome")
    log = tmp_path / "shell-operator" / "shell-operator.log"
    new_pod(tmp_path, log)
    assert not welcome.exists()  # its first run is a full reconcile: the one the wait sees end
    log.parent.mkdir()
    log.write_text("the operator before: NOTES：\n")  # noqa: RUF001 - a character of two bytes and more
    new_pod(tmp_path, log)
    # `kubectl logs` of the installer's pod: what the new operator writes, from the byte it starts at
    (pod,) = json.loads((tmp_path / "pod-logs.json").read_text())["pods"]
    assert pod == {"namespace": "kubesphere-system", "prefix": "ks-installer-", "log": str(log),
                   "offset": len(log.read_bytes())}
