"""A warm engine (installer.launch.warm_engine) whose runs are :func:`target`, not the hook: for the protocol's tests.

``python tests/unit/warm_target.py DIR OWNER TICKS STAMP_FILE``: serves in DIR while the stamp file's content is the
one it read at start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from installer.launch import warm_engine


def target(argv: list[str]) -> int:
    """``echo CODE``: print what the run got, exit CODE; ``wait``: print its pid (and a child's in its process
    group), then wait for SIGTERM and exit 3; ``die``: end by SIGKILL."""
    print(f"out argv={argv} cwd={os.getcwd()} X={os.environ.get('X')} ppid={os.getppid()}", flush=True)
    print("err line", file=sys.stderr, flush=True)
    if argv[0] == "echo":
        return int(argv[1])
    if argv[0] == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    got: list[int] = []
    signal.signal(signal.SIGTERM, lambda number, _frame: got.append(number))
    child = subprocess.Popen(["sleep", "120"])
    print(f"waiting pid={os.getpid()} child={child.pid}", flush=True)
    deadline = time.monotonic() + 60
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    print(f"got signal {got}", flush=True)
    child.kill()
    child.wait()
    return 3 if got else 4


def main(directory: str, owner: str, ticks: str, stamp_file: str) -> None:
    lock = warm_engine.take_lock(directory)
    assert lock is not None
    stamp = Path(stamp_file).read_text()
    engine = warm_engine.WarmEngine(directory, int(owner), ticks, stamp, lock, target=target,
                                    stamp_of=lambda: Path(stamp_file).read_text())
    engine.serve()


if __name__ == "__main__":
    main(*sys.argv[1:5])
