"""The installer pod's log as KubeSphere's docs show it: ``python -m installer.podlog /shell-operator start``.

shell-operator writes one JSON record per line, the hook's lines inside them. The docs' command
(``kubectl logs -n kubesphere-system -l 'app in (ks-install, ks-installer)' -f``) shows, as the original installer's
pod did, the hook's lines as they are (``Start installing monitoring``, ``task monitoring status is successful
(1/4)``, the welcome box) and the operator's own as ``TIME LEVEL     : message``. This runs the command as a child,
prints its output so, passes the pod's signals on, reaps orphans when it is PID 1 and exits with the child's code.
``KS_POD_LOG_FORMAT=json`` runs the command in its place instead (the JSON lines, for a log shipper).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from typing import IO

FORMAT_ENV = "KS_POD_LOG_FORMAT"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
#: Fields of an operator record worth a reader's eye after its message.
DETAILS = ("error", "hook", "binding", "name", "path", "address")
CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F) if c != 0x09}


def one_line(text: str) -> str:
    """``text`` with control characters escaped, so no value makes or rewrites a line of the log."""
    return text.translate(CONTROL)


def pod_line(raw: str) -> str:
    """One line of the pod log for one line of shell-operator's output."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return one_line(raw)
    if not isinstance(entry, dict):
        return one_line(raw)
    msg = one_line(str(entry.get("msg", "")))
    if "hook" in entry and "output" in entry:  # a line the hook printed (or a record it proxied)
        return msg
    level = str(entry.get("level", "info")).upper()
    details = "".join(f" {key}={one_line(str(entry[key]))}" for key in DETAILS if entry.get(key) not in (None, ""))
    return f"{entry.get('time', '')} {level:<9}: {msg}{details}"


def relay(lines: Iterable[str], out: IO[str]) -> None:
    """Write each line of ``lines`` as :func:`pod_line` makes it, flushed (a ``-f`` reader sees it at once)."""
    for raw in lines:
        out.write(pod_line(raw.rstrip("\n")) + "\n")
        out.flush()


class Child:
    """The command, its signals forwarded; its exit code kept even when an orphan reaper collects it."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", bufsize=1)
        self.code: int | None = None
        for number in FORWARDED:
            signal.signal(number, self._forward)
        if os.getpid() == 1:
            signal.signal(signal.SIGCHLD, self._reap)

    def _forward(self, number: int, _frame: object) -> None:
        if self.code is None:
            self.proc.send_signal(number)

    def _reap(self, _number: int, _frame: object) -> None:
        """As PID 1: collect every exited process (the hook's orphans), noting the command's own code."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.proc.pid:
                self.code = os.waitstatus_to_exitcode(status)

    def wait(self) -> int:
        if self.code is None:
            code = self.proc.wait()
            self.code = self.code if self.code is not None else code
        return self.code if self.code >= 0 else 128 - self.code


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m installer.podlog COMMAND [ARG...]", file=sys.stderr)
        return 2
    if os.environ.get(FORMAT_ENV, "text").lower() == "json":
        os.execvp(argv[0], argv)
    child = Child(argv)
    assert child.proc.stdout is not None
    relay(child.proc.stdout, sys.stdout)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
