"""The result step's outcome, once its run has settled: ``kubesphere_running`` when upstream's core phase is
installed, and the welcome box in the log with it when the run is one that shows it and every enabled module is
installed (upstream logged the box only after a run where every task succeeded)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kubernetes import client

from installer.engine import welcome, welcome_box

ADDRESS = "http://172.31.0.1:30880"


@pytest.fixture(autouse=True)
def console_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """ks-apiserver and ks-console Available, the console at ADDRESS, the default password."""
    monkeypatch.setattr(welcome, "wait_for_console", lambda *_args: None)
    monkeypatch.setattr(welcome, "console_address", lambda _api: ADDRESS)
    monkeypatch.setattr(welcome, "password_line", lambda _api: "Password: P@88w0rd")


def run_step(path: Path, announce: bool, missing: list[str], pending: list[str]) -> list[tuple[bool, str]]:
    reports: list[tuple[bool, str]] = []
    step = welcome.WelcomeStep(client.ApiClient(), path, 5, threading.Event(),
                               lambda ready, message: reports.append((ready, message)),
                               missing=lambda: missing, pending=lambda: pending)
    step.start()
    step.settle(announce=announce)
    step.join()
    return reports


def box_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage() == welcome_box.TITLE]


def test_a_run_that_ends_with_every_module_installed_shows_the_box(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "playbooks" / "kubesphere_running"
    with caplog.at_level("INFO", logger="installer"):
        reports = run_step(path, announce=True, missing=[], pending=[])
    assert reports == [(True, "ks-apiserver and ks-console are Available")]
    text = path.read_text()
    assert welcome_box.is_box(text) and f"Console: {ADDRESS}" in text
    logged = [r.getMessage() for r in caplog.records]
    start = logged.index(welcome_box.RULE)
    assert logged[start:start + len(text.splitlines())] == text.splitlines()


def test_a_failed_pluggable_module_writes_the_file_without_the_box(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "kubesphere_running"
    with caplog.at_level("INFO", logger="installer"):
        run_step(path, announce=True, missing=[], pending=["devops"])
    assert welcome_box.is_box(path.read_text())
    assert box_lines(caplog) == []
    assert "Not showing the welcome box: devops not installed" in caplog.messages


def test_a_run_that_does_not_show_the_box_still_rewrites_the_file(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "kubesphere_running"
    welcome_box.save(path, welcome_box.render(ADDRESS, "Password: P@88w0rd", "2020-01-02 03:04:05"))
    with caplog.at_level("INFO", logger="installer"):
        run_step(path, announce=False, missing=[], pending=[])
    assert welcome_box.is_box(path.read_text()) and "2020-01-02 03:04:05" not in path.read_text()
    assert box_lines(caplog) == []


def test_a_failed_core_module_writes_neither(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "kubesphere_running"
    with caplog.at_level("INFO", logger="installer"):
        run_step(path, announce=True, missing=["ks-core"], pending=["ks-core"])
    assert not path.exists()
    assert box_lines(caplog) == []


def test_restamped_changes_only_the_time_line() -> None:
    text = welcome_box.render(ADDRESS, "Password: P@88w0rd", "2020-01-02 03:04:05")
    again = welcome_box.restamped(text, "2030-04-05 06:07:08")
    changed = [(a, b) for a, b in zip(text.splitlines(), again.splitlines(), strict=True) if a != b]
    assert changed == [("https://kubesphere.io             2020-01-02 03:04:05",
                        "https://kubesphere.io             2030-04-05 06:07:08")]
    assert again.endswith("\n") and welcome_box.is_box(again)
    assert not welcome_box.is_box("") and not welcome_box.is_box("Welcome to KubeSphere\n")
