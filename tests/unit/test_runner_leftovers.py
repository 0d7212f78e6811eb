"""A killed run's processes that ansible-runner's kill did not reach are ended by their environment marker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from installer.engine.runner import end_leftovers


def test_leftovers_of_a_run_are_ended_and_others_left_alone() -> None:
    marker = f"KS_INVENTORY_FILE=/tmp/leftover-test-{os.getpid()}/inventory.jsonl"
    name, value = marker.split("=", 1)
    ignoring = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"
    # One in a session of its own, as an Ansible worker is; one that ignores SIGTERM; one of another run.
    ours = [subprocess.Popen(["sleep", "60"], env={**os.environ, name: value}, start_new_session=True),
            subprocess.Popen([sys.executable, "-c", ignoring], env={**os.environ, name: value},
                             stdout=subprocess.PIPE)]
    assert ours[1].stdout is not None
    ours[1].stdout.readline()  # its handler is set
    other = subprocess.Popen(["sleep", "60"], env={**os.environ, name: value + ".other"})
    try:
        found = end_leftovers(marker.encode(), grace=1.0)
        assert sorted(found) == sorted(p.pid for p in ours)
        assert [p.wait(timeout=5) for p in ours] == [-signal.SIGTERM, -signal.SIGKILL]
        assert other.poll() is None
        assert end_leftovers(marker.encode()) == []
    finally:
        for proc in [*ours, other]:
            proc.kill()
            proc.wait()
        if ours[1].stdout is not None:
            ours[1].stdout.close()
