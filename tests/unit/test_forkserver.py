"""ansible-playbook through the fork server: a run is ansible-playbook with the run's own environment, exit code,
output and events; it is a child of the one server (not a new interpreter); a cancelled run leaves no process; with
no server the client runs ansible-playbook itself."""

from __future__ import annotations

import json
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

from installer.engine.runner import CALLBACKS_DIR
from installer.launch.forkserver import CLIENT, PLAYBOOK, ForkServer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[ForkServer]:
    forks = ForkServer()
    yield forks
    forks.stop()


def _playbook(directory: Path, tasks: list[dict]) -> Path:
    """A playbook in ``directory`` (its runs get the project's callback plugin, ks_preload, as the engine's do)."""
    directory.mkdir()
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
        envvars={"ANSIBLE_NOCOLOR": "1", "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS_DIR), **env},
        event_handler=lambda e: events.append(e["event"]) or True, **kwargs)
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
    client.write_text(CLIENT.format(python=sys.executable, command=[str(PLAYBOOK)],
                                    socket=str(tmp_path / "gone")))
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


PREFORK = """
import json, os, shlex, sys, threading
from pathlib import Path
import ansible_runner
from installer.launch.forkserver import ForkServer

playbook, mode = sys.argv[1], sys.argv[2]
if mode == "threads":
    threading.Thread(target=threading.Event().wait, daemon=True).start()
forks = ForkServer()
forks.prefork()
pid = forks.pid
seen = {"pid": pid, "engine": os.getpid(), "new_interpreter": forks._proc is not None}
if pid is not None:
    seen["ppid"] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    seen["cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
client = forks.client()
seen["same_server"] = forks.pid == pid
pdd = str(Path(playbook).parent / mode)
os.makedirs(pdd)
result = ansible_runner.run(private_data_dir=pdd, binary=str(client), cmdline=shlex.quote(playbook), quiet=True,
                            inventory=f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}",
                            envvars={"KS_V": mode, "ANSIBLE_CALLBACK_PLUGINS": os.environ["KS_CALLBACKS"]})
seen["run"] = [result.status, result.rc, (Path(pdd) / "artifacts" / result.config.ident / "stdout").read_text()]
forks.stop()
seen["after_stop"] = [pid is not None and Path(f"/proc/{pid}").exists(), client.parent.exists()]
print(json.dumps(seen))
"""


def _prefork(tmp_path: Path, mode: str) -> dict:
    """An engine-like process (one thread, or a second one with ``mode`` threads) that preforks and runs a play."""
    playbook = tmp_path / "p" / "play.yaml"
    if not playbook.exists():
        _playbook(playbook.parent, [{"name": "Say", "debug": {"msg": "value={{ lookup('env', 'KS_V') }}"}}])
    env = {**os.environ, "KS_CALLBACKS": str(CALLBACKS_DIR)}
    proc = subprocess.run([sys.executable, "-c", PREFORK, str(playbook), mode], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_prefork_forks_the_server_from_the_engine_and_stop_ends_it(tmp_path: Path) -> None:
    seen = _prefork(tmp_path, "alone")
    assert seen["pid"] is not None and not seen["new_interpreter"]
    assert seen["ppid"] == seen["engine"]  # forked from the engine: no interpreter start, no second import
    assert "installer.launch.forkserver" in seen["cmdline"]
    assert seen["same_server"]  # the first run uses it
    status, rc, out = seen["run"]
    assert (status, rc) == ("successful", 0) and "value=alone" in out
    assert seen["after_stop"] == [False, False]  # ended, collected, its socket and client removed


def test_an_engine_with_other_threads_does_not_fork_and_starts_the_server_on_first_use(tmp_path: Path) -> None:
    seen = _prefork(tmp_path, "threads")
    assert seen["pid"] is None  # not forked
    status, rc, out = seen["run"]
    assert (status, rc) == ("successful", 0) and "value=threads" in out
    assert not seen["same_server"]  # a server of its own, started by the run
    assert seen["after_stop"][1] is False
