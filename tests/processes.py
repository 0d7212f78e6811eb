"""The live processes of this machine, read from /proc (for tests that check that nothing was left running)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def processes_naming(text: str | Path) -> dict[int, tuple[int, str]]:
    """pid → (parent pid, command line) of the live processes whose command line contains ``text``."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if str(text) in cmdline:
                found[int(proc.name)] = (int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]), cmdline)
    return found
