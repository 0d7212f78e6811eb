"""Ending the engine's process without the interpreter's teardown."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import NoReturn

from installer.launch import cpython_private


def exit_now(code: int | None) -> NoReturn:
    """Exit with ``code`` once the exit handlers ran, non-daemon threads ended and logs and standard streams are
    flushed, skipping the interpreter's teardown of every loaded module (about 0.1 s with the Kubernetes client
    loaded, on every hook run). On an interpreter installer.launch.cpython_private was not written for: a normal
    exit."""
    if not cpython_private.written_for():
        sys.exit(code)
    cpython_private.end_threads()  # what the interpreter's exit does first: thread pools told to stop, non-daemon
    # threads joined
    cpython_private.run_exit_handlers()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed stream: nothing to flush
            stream.flush()
    os._exit((code or 0) & 0xFF)
