"""Writes that travel while the reconcile goes on: one thread sends them, one at a time, in the order they were
submitted, so they land as they would have from the reconcile's own thread (a status patch never overtakes an
earlier one). :meth:`OrderedWrites.drain` waits for all of them: before a write that must come after them (the
guarded Ready), and before the reconcile ends. A process killed meanwhile leaves a prefix of them written, as a
kill between two direct writes would."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class OrderedWrites:
    """A FIFO of writes and the one daemon thread (started with the first) that sends them."""

    def __init__(self, name: str = "ordered-writes") -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, write: Callable[[], object]) -> None:
        """Send ``write`` after every write submitted before it."""
        with self._idle:
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._send, name=self.name, daemon=True)
                self._thread.start()
        self._queue.put(write)

    def _send(self) -> None:
        while True:
            write = self._queue.get()
            try:
                write()
            except BaseException as exc:  # the next drain raises the first; later writes still go
                with self._idle:
                    if self._error is None:
                        self._error = exc
                    else:
                        log.debug("a later write failed too", exc_info=True)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def drain(self, raise_error: bool = True) -> None:
        """Wait until every write submitted so far was sent; then raise the first that failed since the last drain
        (``raise_error=False``: log it, when the caller is failing already)."""
        with self._idle:
            self._idle.wait_for(lambda: self._pending == 0)
            error, self._error = self._error, None
        if error is None:
            return
        if raise_error:
            raise error
        log.error("A status or Event write failed: %s", error)
