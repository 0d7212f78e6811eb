"""The hook's log: plain lines on stderr, and warnings and errors at their level in the operator's log.

shell-operator logs every line a hook prints at info. With ``LOG_PROXY_HOOK_JSON=true`` (the installer manifest
sets it) it reads a hook's output as JSON log records and keeps their level; but it parses each pipe read as one
document, so a burst of JSON lines read together, or any plain line, would fall back to info. So the hook keeps its
many plain lines on stderr and prints only warnings and errors, one JSON record each, on stdout, which
shell-operator proxies separately, and waits after each until shell-operator has read it (so no two are read
together).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
import struct
import sys
import termios
import time
from typing import IO

PROXY_ENV = "LOG_PROXY_HOOK_JSON"
LEVELS = {logging.WARNING: "warn", logging.ERROR: "error", logging.CRITICAL: "error"}


class ProxyRecord(logging.Formatter):
    """One JSON object per record, with the level and message shell-operator's proxy reads."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({"level": LEVELS.get(record.levelno, "info"), "msg": super().format(record)})


class RecordHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record and returns once shell-operator has read it (see :func:`wait_read`)."""

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        wait_read(self.stream)


def wait_read(stream: IO[str], timeout: float = 1.0) -> None:
    """When ``stream`` is a pipe, wait (at most ``timeout``) until its reader has taken everything written."""
    try:
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if not pending:
            return
        time.sleep(0.002)


def proxied() -> bool:
    return os.environ.get(PROXY_ENV, "").lower() in ("1", "true")


def setup(proxy: bool | None = None) -> None:
    """Log at info to stderr; when shell-operator proxies JSON, warnings and errors go to stdout as records."""
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("%(message)s"))
    handlers: list[logging.Handler] = [stderr]
    if proxied() if proxy is None else proxy:
        stderr.addFilter(lambda record: record.levelno < logging.WARNING)
        stdout = RecordHandler(sys.stdout)
        stdout.setLevel(logging.WARNING)
        stdout.setFormatter(ProxyRecord("%(message)s"))
        handlers.append(stdout)
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True)
    for noisy in ("kubernetes", "urllib3", "ansible_runner"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
