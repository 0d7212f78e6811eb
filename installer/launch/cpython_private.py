"""The private names of CPython's standard library the installer uses (its engine's fast exit, the fork server), each
behind a function that checks the running interpreter first: written for CPython :data:`WRITTEN_FOR` (the image's
Python, ``python:3.11``). On another interpreter each refuses with :class:`UnsupportedPython`; its callers check
:func:`written_for` first and take the public way instead (a normal exit; ``ansible-playbook`` run without the fork
server)."""

from __future__ import annotations

import atexit
import sys
import threading

#: The CPython minor versions the names below were written and tested for.
WRITTEN_FOR = ((3, 11),)


class UnsupportedPython(RuntimeError):
    """A private name is used on an interpreter it was not written for."""


def python_version() -> tuple[str, tuple[int, int]]:
    """The running interpreter's implementation and minor version."""
    return sys.implementation.name, (sys.version_info[0], sys.version_info[1])


def written_for() -> bool:
    """Whether the running interpreter is one the private names were written for."""
    implementation, version = python_version()
    return implementation == "cpython" and version in WRITTEN_FOR


def _require(use: str) -> None:
    if not written_for():
        implementation, version = python_version()
        supported = ", ".join(f"{a}.{b}" for a, b in WRITTEN_FOR)
        raise UnsupportedPython(f"{use} relies on private names of CPython {supported}, and this is {implementation} "
                                f"{version[0]}.{version[1]}: review installer/launch/cpython_private.py for it")


def end_threads() -> None:
    """What the interpreter's exit does first: tell thread pools to stop and join the non-daemon threads
    (``threading._shutdown``, CPython 3.11)."""
    _require("threading._shutdown")
    threading._shutdown()  # type: ignore[attr-defined]


def run_exit_handlers() -> None:
    """Run (and unregister) the ``atexit`` handlers now, as an exit would (``atexit._run_exitfuncs``, CPython 3.11)."""
    _require("atexit._run_exitfuncs")
    atexit._run_exitfuncs()


def clear_exit_handlers() -> None:
    """Unregister every ``atexit`` handler without running it (``atexit._clear``, CPython 3.11): a forked process
    that must not run its parent's."""
    _require("atexit._clear")
    atexit._clear()
