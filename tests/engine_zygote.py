"""``python -m installer`` for the tests, forked from one process per pytest worker that has imported the engine.

Each run is ``installer.cli.main`` in a fork of this process with the test's argv, environment, working directory and
standard streams, and its exit code: what ``python -m installer`` runs, without an interpreter start and the
engine's imports (about 1 CPU-s) each time. The fork server's client (``installer.launch.forkserver.CLIENT``) stands in
for ``python -m installer``: it hands its streams over, and with no zygote runs ``python -m installer`` itself.

Not forwarded: signals, and the client's death (a run goes on to its end). Tests that signal or kill the engine, or
look at its process, start ``python -m installer`` themselves.

Run as ``python tests/engine_zygote.py SOCKET``; it prints ``ready`` and serves until its stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from installer.launch import forkserver

#: The command the tests run for ``python -m installer`` (the client while a zygote serves this worker).
ENGINE: list[str] = [sys.executable, "-m", "installer"]

#: What the client runs: the engine's ``python -m installer`` (in a fork of the zygote, or itself with none).
COMMAND = [sys.executable, "-m", "installer"]


def write_client(directory: Path, sock: Path) -> Path:
    """The client script for a zygote listening on ``sock``."""
    client = directory / "installer"
    client.write_text(forkserver.CLIENT.format(python=sys.executable, command=COMMAND, socket=str(sock)))
    client.chmod(0o700)
    return client


def _run(conn: socket.socket) -> NoReturn:
    """In the fork: become the client's ``python -m installer``; exit with its code."""
    code = 1
    try:
        argv = forkserver.take_over(conn)[len(COMMAND):]
        sys.argv = [sys.executable, *argv]
        from installer.cli import main

        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # as the interpreter reports an uncaught exception
        traceback.print_exc()
        code = 1
    forkserver.finish(conn, code)


def serve(path: str) -> None:
    # The engine and the Kubernetes client, imported once (nothing here starts a thread or reads the environment).
    import installer.cli
    import installer.engine.reconcile

    del installer

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        ready, _, _ = select.select([listener, sys.stdin], [], [], 1.0)
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return
        if listener in ready:
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                _run(conn)
            conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
