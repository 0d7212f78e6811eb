"""The installer pod's log as KubeSphere's docs show it: ``python -m installer.podlog /shell-operator start``.

shell-operator writes one JSON record per line, the hook's lines inside them. The docs' command
(``kubectl logs -n kubesphere-system -l 'app in (ks-install, ks-installer)' -f``) shows, as the original installer's
pod did, the hook's lines as they are (``Start installing monitoring``, ``task monitoring status is successful
(1/4)``, the welcome box) and the operator's own as ``TIME LEVEL     : message``. This runs the command as a child,
prints its output so, passes the pod's signals on, reaps orphans when it is PID 1 and exits with the child's code.
``KS_POD_LOG_FORMAT=json`` runs the command in its place instead (the JSON lines, for a log shipper).

Whatever the child writes, one line of its output is one line of the pod log, and the relay lives on: a line is read
up to :data:`LINE_CAP` bytes (the rest is skipped; the printed line ends with ``[... N bytes cut]``), bytes that are
not UTF-8 and every character that is not printable (C0 and C1 controls, bidi controls, line and paragraph
separators) are written as escapes in every field printed, a line that is not a record (nested past any parser,
cut, not JSON) is printed as escaped text, and an error on one line is that line's, never the relay's. Only a stdout
that cannot be written stops the printing; the child's output is still read until it exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import IO

FORMAT_ENV = "KS_POD_LOG_FORMAT"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
#: Fields of an operator record worth a reader's eye after its message.
DETAILS = ("error", "hook", "binding", "name", "path", "address")
#: Bytes of one line of the child's output that are shown; the rest of a longer line is skipped and counted.
LINE_CAP = 64 * 1024
_SKIP = 1 << 20


def one_line(text: str) -> str:
    """``text`` with every character that is not printable escaped (``\\x0a``, ``\\x9b``, ``\\u202e``,
    ``\\u2028``, ``\\ud800``), so no value makes, hides or reorders a line of the log."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(ord(c)) for c in text)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def cut_marker(cut: int) -> str:
    """What ends a line of which ``cut`` bytes were not shown."""
    return f" [... {cut} bytes cut]"


def pod_line(raw: str) -> str:
    """One line of the pod log for one (whole) line of shell-operator's output."""
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        return one_line(raw)
    if not isinstance(entry, dict):
        return one_line(raw)
    msg = one_line(str(entry.get("msg", "")))
    if "hook" in entry and "output" in entry:  # a line the hook printed (or a record it proxied)
        return msg
    level = one_line(str(entry.get("level", "info")).upper())
    details = "".join(f" {key}={one_line(str(entry[key]))}" for key in DETAILS if entry.get(key) not in (None, ""))
    return f"{one_line(str(entry.get('time', '')))} {level:<9}: {msg}{details}"


def shown(data: bytes, cut: int = 0) -> str:
    """The pod log's line for ``data`` (a line of the child's output without its newline, of which ``cut`` more
    bytes were skipped): a record formatted, anything else escaped; never an exception."""
    text = data.decode("utf-8", "backslashreplace")
    try:
        line = one_line(text) if cut else pod_line(text)
    except Exception:  # a line nested past str() or too big to format: shown as the text it is
        try:
            line = one_line(text)
        except Exception as exc:
            line = f"[a line of {len(data) + cut} bytes not shown: {type(exc).__name__}]"
    return line + cut_marker(cut) if cut else line


def lines(stream: IO[bytes]) -> Iterator[tuple[bytes, int]]:
    """Each line of ``stream`` (without its newline) up to :data:`LINE_CAP` bytes, and how many more it had (read
    and dropped in pieces: a line of any length costs no more memory than the cap)."""
    while chunk := stream.readline(LINE_CAP + 1):
        if chunk.endswith(b"\n") or len(chunk) <= LINE_CAP:  # a whole line (the last one may lack its newline)
            yield chunk.removesuffix(b"\n").removesuffix(b"\r"), 0
            continue
        head, cut = chunk[:LINE_CAP], len(chunk) - LINE_CAP
        while not chunk.endswith(b"\n") and (chunk := stream.readline(_SKIP)):
            cut += len(chunk) - chunk.endswith(b"\n")
        yield head, cut


def relay(stream: IO[bytes], out: IO[bytes]) -> None:
    """Write each line of ``stream`` as :func:`shown` makes it, flushed (a ``-f`` reader sees it at once), until
    ``stream`` ends; once ``out`` cannot be written, read on without writing (the child never blocks on its pipe)."""
    writable = True
    for data, cut in lines(stream):
        if not writable:
            continue
        try:
            out.write(shown(data, cut).encode("utf-8", "backslashreplace") + b"\n")
            out.flush()
        except (OSError, ValueError):  # the log's reader is gone: the child still runs
            writable = False
        except Exception:  # one line's problem (memory), never the relay's
            continue


class Child:
    """The command, its signals forwarded; its exit code kept even when an orphan reaper collects it."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.code: int | None = None
        for number in FORWARDED:
            signal.signal(number, self._forward)
        if os.getpid() == 1:
            signal.signal(signal.SIGCHLD, self._reap)

    def _forward(self, number: int, _frame: object) -> None:
        if self.code is None:
            with contextlib.suppress(OSError):  # already gone: its exit is collected below
                self.proc.send_signal(number)

    def _reap(self, _number: int, _frame: object) -> None:
        """As PID 1: collect every exited process (the hook's orphans), noting the command's own code."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except OSError:
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
    relay(child.proc.stdout, sys.stdout.buffer)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
