"""The real shell-operator runs a hook on the simulated cluster and hands it kubernetes binding contexts."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shelloperator import ShellOperator
from simcluster import SimCluster, pid_alive

pytestmark = pytest.mark.cluster

HOOK = """#!/usr/bin/env bash
# Test hook: a kubernetes binding on Widgets' .spec in one namespace; copies each binding context it gets.
set -euo pipefail
if [ "${1:-}" = "--config" ]; then
  cat <<'EOF'
configVersion: v1
kubernetes:
- name: widgets
  apiVersion: @GROUP@/@VERSION@
  kind: @KIND@
  namespace:
    nameSelector:
      matchNames: [@NAMESPACE@]
  jqFilter: .spec
EOF
  exit 0
fi
n=$(ls @OUT@ | wc -l)
cp "$BINDING_CONTEXT_PATH" "@OUT@/$(printf %04d "$n").json"
echo "test hook ran: run $n with $(jq -c '[.[] | .type + ":" + (.watchEvent // "")]' "$BINDING_CONTEXT_PATH")"
"""


class HookRuns:
    """The binding contexts the test hook copied, one file per run."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def count(self) -> int:
        return len(list(self.out.glob("*.json")))

    def contexts(self, since: int = 0) -> list[dict[str, Any]]:
        """Binding contexts of runs ``since`` onwards, flattened (shell-operator may combine events in one run)."""
        files = sorted(self.out.glob("*.json"))[since:]
        return [ctx for f in files for ctx in json.loads(f.read_text())]

    def wait(self, runs: int, timeout: float = 30) -> list[dict[str, Any]]:
        """Wait until at least ``runs`` runs happened; the contexts of the new ones."""
        deadline = time.monotonic() + timeout
        while self.count() < runs:
            if time.monotonic() > deadline:
                raise AssertionError(f"hook ran {self.count()} times, expected {runs}: {self.contexts()}")
            time.sleep(0.1)
        return self.contexts(runs - 1)


@pytest.fixture
def hook_runs(tmp_path: Path, sim_cluster: SimCluster, widgets: Any, namespace: str) -> Iterator[
        tuple[ShellOperator, HookRuns]]:
    hooks, out = tmp_path / "hooks", tmp_path / "out"
    hooks.mkdir()
    out.mkdir()
    script = hooks / "widgets.sh"
    text = HOOK
    for key, value in {"@GROUP@": widgets.group, "@VERSION@": widgets.version, "@KIND@": widgets.kind,
                       "@NAMESPACE@": namespace, "@OUT@": str(out)}.items():
        text = text.replace(key, value)
    script.write_text(text)
    script.chmod(0o755)
    with ShellOperator(sim_cluster.kubeconfig, hooks, work_dir=tmp_path / "so",
                       path_prepend=[sim_cluster.bin_dir]) as operator:
        operator.wait_for_log(r"Kubernetes bindings for hook are enabled successfully", timeout=60)
        yield operator, HookRuns(out)
    assert not pid_alive(operator.popen.pid), "shell-operator still runs after stop()"


def test_hook_gets_binding_contexts_for_spec_changes_only(hook_runs: tuple[ShellOperator, HookRuns], widgets: Any,
                                                          namespace: str) -> None:
    operator, runs = hook_runs
    # start-up: Synchronization with the (empty) snapshot
    (sync,) = runs.wait(1)
    assert sync["binding"] == "widgets"
    assert sync["type"] == "Synchronization"
    assert sync["objects"] == []

    widgets.create(namespace, "w1", {"size": 1})
    (added,) = runs.wait(2)
    assert (added["binding"], added["type"], added["watchEvent"]) == ("widgets", "Event", "Added")
    assert added["object"]["metadata"]["name"] == "w1"
    assert added["filterResult"] == {"size": 1}

    new_spec = widgets.patch_spec(namespace, "w1", {"size": 2, "color": "blue"})["spec"]
    (modified,) = runs.wait(3)
    assert (modified["binding"], modified["type"], modified["watchEvent"]) == ("widgets", "Event", "Modified")
    assert modified["object"]["metadata"]["name"] == "w1"
    assert modified["object"]["metadata"]["namespace"] == namespace
    assert modified["filterResult"] == new_spec == {"size": 2, "color": "blue"}

    # a status-only change is filtered out by jqFilter .spec: no run, also not one merged into the next
    mark = operator.mark()
    widgets.patch_status(namespace, "w1", {"phase": "Ready"})
    time.sleep(3)
    assert runs.count() == 3, runs.contexts(3)
    widgets.patch_spec(namespace, "w1", {"size": 3})
    after = runs.wait(4)
    assert runs.count() == 4
    assert [(c["watchEvent"], c["filterResult"]) for c in after] == [("Modified", {"size": 3, "color": "blue"})]

    # the hook's output lands in shell-operator's log
    operator.wait_for_log(r"test hook ran: run 3 with \[\\?\"Event:Modified", since=mark, timeout=10)


def test_listens_on_loopback_only_and_stops(hook_runs: tuple[ShellOperator, HookRuns]) -> None:
    operator, _ = hook_runs
    assert "--listen-address=127.0.0.1" in operator.argv()
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.port}/metrics", timeout=5) as resp:
        assert b"shell_operator_live_ticks" in resp.read()
    assert operator.debug_socket.is_socket()
