"""The hook's log under shell-operator's JSON proxy: plain info lines on stderr, warnings and errors as records."""

from __future__ import annotations

import json
import logging
import os
import threading
import time

import pytest

from installer import hooklog


@pytest.fixture(autouse=True)
def _restore_logging() -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_proxied_warnings_and_errors_are_json_records_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    hooklog.setup(proxy=True)
    log = logging.getLogger("installer")
    log.info("Start installing monitoring")
    log.warning("Reconcile finished, not Ready: failed: monitoring")
    log.error("spec invalid:\n  a.b: wrong")
    out, err = capsys.readouterr()
    assert err.splitlines() == ["Start installing monitoring"]
    records = [json.loads(line) for line in out.splitlines()]
    assert records == [{"level": "warn", "msg": "Reconcile finished, not Ready: failed: monitoring"},
                       {"level": "error", "msg": "spec invalid:\n  a.b: wrong"}]


def test_proxy_follows_the_environment(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(hooklog.PROXY_ENV, raising=False)
    hooklog.setup()
    logging.getLogger("installer").error("plain")
    out, err = capsys.readouterr()
    assert (out, err) == ("", "plain\n")
    monkeypatch.setenv(hooklog.PROXY_ENV, "true")
    hooklog.setup()
    logging.getLogger("installer").error("as record")
    out, err = capsys.readouterr()
    assert json.loads(out) == {"level": "error", "msg": "as record"} and err == ""


def test_an_exception_keeps_its_traceback_in_the_record(capsys: pytest.CaptureFixture[str]) -> None:
    hooklog.setup(proxy=True)
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("installer").exception("The installer failed unexpectedly")
    record = json.loads(capsys.readouterr().out)
    assert record["level"] == "error" and "Traceback" in record["msg"] and "ValueError: boom" in record["msg"]


def test_each_record_is_read_alone_from_a_pipe() -> None:
    """shell-operator's proxy parses each pipe read as one JSON document: a slow reader still gets one record per
    read, because the handler waits until the previous one was taken."""
    read_end, write_end = os.pipe()
    reads: list[bytes] = []

    def reader() -> None:
        while chunk := (time.sleep(0.1), os.read(read_end, 65536))[1]:
            reads.append(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    with os.fdopen(write_end, "w") as stream:
        handler = hooklog.RecordHandler(stream)
        handler.setFormatter(hooklog.ProxyRecord("%(message)s"))
        for message in ("first", "second", "third"):
            handler.emit(logging.LogRecord("installer", logging.ERROR, __file__, 1, message, None, None))
    thread.join()
    os.close(read_end)
    assert [json.loads(chunk) for chunk in reads] == [{"level": "error", "msg": m} for m in ("first", "second",
                                                                                              "third")]


def test_values_others_wrote_are_escaped_and_cut_for_a_log_line() -> None:
    from installer.escape import escaped

    assert escaped("x\n[error] forged\x1b[31m\u202e") == "x\\n[error] forged\\u001b[31m\\u202e"
    assert escaped("a" * 500, 10) == "a" * 10 + "..."
    assert escaped("plain ñ 😀") == "plain ñ 😀"


def test_unknown_purge_names_are_logged_escaped(caplog: pytest.LogCaptureFixture) -> None:
    from installer.engine.planning import purge_requested

    cc = {"metadata": {"annotations": {"installer.kubesphere.io/purge": "redis,x\n[error] forged\x1b[31m"}}}
    with caplog.at_level(logging.WARNING, logger="installer"):
        assert purge_requested(cc) == {"redis"}
    assert caplog.messages == ["installer.kubesphere.io/purge names unknown modules, ignored: "
                               "x\\n[error] forged\\u001b[31m"]
