"""ansible-playbook through the fork server: a run is ansible-playbook with the run's own environment, exit code,
output and events; it is a child of the one server (not a new interpreter); a cancelled run leaves no process; with
no server the client runs ansible-playbook itself."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import ansible_runner
import pytest
import yaml
from processes import processes_naming

from installer.forkserver import CLIENT, PLAYBOOK, ForkServer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[ForkServer]:
    forks = ForkServer()
    yield forks
    forks.stop()


def _playbook(directory: Path, tasks: list[dict]) -> Path:
    """A playbook beside the project's callback plugins (ks_preload), as the engine's playbooks are."""
    directory.mkdir()
    (directory / "callback_plugins").symlink_to(REPO / "playbooks" / "callback_plugins")
    path = directory / "play.yaml"
    path.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    return path


def _run(client: Path, playbook: Path, env: dict[str, str], **kwargs: object) -> tuple[ansible_runner.Runner, str,
                                                                                          list[str]]:
    events: list[str] = []
    pdd = tempfile.mkdtemp(dir=playbook.parent)
    result = ansible_runner.run(
        private_data_dir=pdd, binary=str(client), cmdline=shlex.quote(str(playbook)), quiet=True,
        inventory=f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}",
        envvars={"ANSIBLE_NOCOLOR": "1", **env}, event_handler=lambda e: events.append(e["event"]) or True, **kwargs)
    stdout = (Path(pdd) / "artifacts" / result.config.ident / "stdout").read_text()
    return result, stdout, events


def test_each_run_is_ansible_playbook_with_its_own_environment(server: ForkServer, tmp_path: Path) -> None:
    playbook = _playbook(tmp_path / "p", [
        {"name": "Say", "debug": {"msg": "value={{ lookup('env', 'KS_TEST_VALUE') }}"}},
        {"name": "Maybe fail", "fail": {"msg": "asked to fail"}, "when": "lookup('env', 'KS_TEST_FAIL') == '1'"}])
    client = server.client()
    assert client is not None
    ok, ok_out, ok_events = _run(client, playbook, {"KS_TEST_VALUE": "first", "KS_TEST_FAIL": "0"})
    failed, failed_out, failed_events = _run(client, playbook, {"KS_TEST_VALUE": "second", "KS_TEST_FAIL": "1"})

    assert (ok.status, ok.rc) == ("successful", 0)
    assert "value=first" in ok_out and "second" not in ok_out
    assert {"playbook_on_start", "runner_on_ok", "runner_on_skipped", "playbook_on_stats"} <= set(ok_events)
    assert (failed.status, failed.rc) == ("failed", 2)
    assert "value=second" in failed_out and "asked to fail" in failed_out
    assert "runner_on_failed" in failed_events
    assert server.client() == client  # one server for every run


def test_a_run_is_a_child_of_the_server_and_a_cancelled_run_leaves_no_process(server: ForkServer,
                                                                              tmp_path: Path) -> None:
    playbook = _playbook(tmp_path / "p", [{"name": "Wait", "ansible.builtin.command": "sleep 613"}])
    client = server.client()
    assert client is not None and server._proc is not None
    cancel = threading.Event()
    seen: dict[int, int] = {}

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not seen:
            seen.update({p: pp for p, (pp, _) in processes_naming(playbook).items() if pp == server._proc.pid})
            time.sleep(0.2)
        time.sleep(1)
        cancel.set()

    threading.Thread(target=watch, daemon=True).start()
    result, _, _ = _run(client, playbook, {}, cancel_callback=cancel.is_set)

    assert result.status == "canceled"
    assert seen, "no ansible-playbook process of the server's was seen"
    deadline = time.monotonic() + 10
    while (processes_naming(playbook) or processes_naming(Path("sleep 613"))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(playbook) == {}
    assert processes_naming(Path("sleep 613")) == {}  # the task's own command too


def test_without_a_server_the_client_runs_ansible_playbook_itself(tmp_path: Path) -> None:
    client = tmp_path / "ansible-playbook"
    client.write_text(CLIENT.format(python=sys.executable, playbook=str(PLAYBOOK), socket=str(tmp_path / "gone")))
    client.chmod(0o700)
    proc = subprocess.run([str(client), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ansible-playbook [core ")


def test_switched_off_there_is_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KS_ANSIBLE_FORKSERVER", "0")
    forks = ForkServer()
    assert forks.client() is None and forks._proc is None


def test_a_killed_engines_socket_and_client_are_removed_by_the_next(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / f"ks-ansible-{dead.pid}-abc"
    running = tmp_path / f"ks-ansible-{os.getppid()}-def"  # an engine still alive keeps its own
    for directory in (left, running):
        directory.mkdir()
        (directory / "ansible-playbook").write_text("client")
    forks = ForkServer()
    try:
        client = forks.client()
        assert client is not None and client.parent.parent == tmp_path
    finally:
        forks.stop()
    assert not left.exists() and running.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name]
