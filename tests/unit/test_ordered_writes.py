"""The ordered writer behind the status and Events: writes land in the order they were made, the reconcile goes on
meanwhile, and a failed write is raised at the next drain, not lost."""

from __future__ import annotations

import threading
import time

import pytest

from installer.engine.ordered_writes import OrderedWrites
from installer.engine.status import StatusWriter


class SlowSink:
    """A status sink whose writes take a while (as the API server's do), recording what lands."""

    def __init__(self) -> None:
        self.landed: list[dict[str, object]] = []
        self.threads: set[str] = set()

    def patch_status(self, status: dict[str, object]) -> None:
        time.sleep(0.02)
        self.threads.add(threading.current_thread().name)
        self.landed.append(status)


def test_flushes_land_in_order_from_another_thread_and_drain_waits_for_them() -> None:
    sink, writes = SlowSink(), OrderedWrites("status-writes")
    writer = StatusWriter(sink, None, writes)
    started = time.monotonic()
    for i in range(5):
        writer.update({"step": i})
        writer.flush()
    assert time.monotonic() - started < 0.05  # the flushes queued, none waited for its write
    writer.drain()
    assert sink.landed == [{"step": i} for i in range(5)]
    assert sink.threads == {"status-writes"}


def test_a_guarded_write_comes_after_every_queued_flush() -> None:
    sink, writes = SlowSink(), OrderedWrites()
    writer = StatusWriter(sink, None, writes)
    writer.update({"a": 1})
    writer.flush()
    seen: list[int] = []
    writer.update({"b": 2})
    assert writer.flush_with(lambda pending: seen.append(len(sink.landed)) is None)
    assert seen == [1]  # the queued flush had landed before the guarded write was made


def test_a_failed_write_is_raised_at_the_drain_and_later_writes_still_go() -> None:
    done: list[str] = []
    writes = OrderedWrites()

    def fail() -> None:
        raise RuntimeError("409 Conflict")

    writes.submit(fail)
    writes.submit(lambda: done.append("after"))
    with pytest.raises(RuntimeError, match="409 Conflict"):
        writes.drain()
    assert done == ["after"]
    writes.drain()  # raised once: the next drain is clean
