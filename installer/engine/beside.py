"""Work started in a thread beside the reconcile's own, whose result the reconcile takes when it needs it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def beside(work: Callable[[], T], name: str) -> Future[T]:
    """Start ``work`` in a daemon thread named ``name``; its result (or exception) comes through the Future."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # the caller that takes the result raises it
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
