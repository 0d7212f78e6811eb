"""The hook through a warm engine (installer.launch.warm_client, warm_engine): a run gets the hook's argv, streams,
working directory, environment and exit code and is a child of the warm engine; signals to the hook reach the run;
a killed hook's run is killed with its process group; a warm engine whose code changed on disk runs nothing, and the
hook then runs the engine itself; the code's stamp sees edits."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from installer.launch import code_stamp, warm_client, warm_engine

HERE = Path(__file__).resolve().parent
CLIENT = [sys.executable, "-c", "import sys; from installer.launch.warm_client import main; main(sys.argv[1:])"]


@dataclass
class Served:
    directory: Path
    stamp: Path
    proc: subprocess.Popen[bytes]

    def log(self) -> str:
        return (self.directory / "engine.log").read_text()

    def client(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*CLIENT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, warm_client.DIR_ENV: str(self.directory), **env},
                                cwd=self.directory.parent)


def _wait_for(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    """A warm engine (tests/unit/warm_target.py) owned by this process, in a short temp dir (a socket's path is at
    most 107 bytes); ``request.param``: its environment's additions."""
    env = {**os.environ, **getattr(request, "param", {})}
    root = Path(tempfile.mkdtemp(prefix="ks-w-"))
    directory, stamp = root / "engine", root / "stamp"
    stamp.write_text("one")
    directory.mkdir(mode=0o700)
    log = open(directory / "engine.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, str(HERE / "warm_target.py"), str(directory), str(os.getpid()),
                             str(warm_client.start_ticks(os.getpid())), str(stamp)], stderr=log,
                            start_new_session=True, env=env)
    _wait_for(lambda: (directory / "s").exists() or proc.poll() is not None)
    assert proc.poll() is None, (directory / "engine.log").read_text()
    yield Served(directory, stamp, proc)
    found = warm_engine.engine_cpu(str(directory))
    if found and found[0] != proc.pid:  # a warm engine the hook started after a refusal
        os.kill(found[0], signal.SIGKILL)
    proc.kill()
    proc.wait()
    log.close()
    shutil.rmtree(root, ignore_errors=True)


def test_a_run_is_the_hooks_own_in_a_fork_of_the_warm_engine(served: Served) -> None:
    proc = served.client("echo", "7", X="from the hook")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7
    cwd = served.directory.parent
    assert f"out argv=['echo', '7'] cwd={cwd} X=from the hook ppid={served.proc.pid}" in out
    assert err == "err line\n"
    assert "ended: exit code 7" in served.log()


def test_sigterm_to_the_hook_reaches_the_run(served: Served) -> None:
    proc = served.client("wait")
    assert proc.stdout is not None
    while not (line := proc.stdout.readline()).startswith("waiting"):
        assert line, proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert "got signal [15]" in out
    assert proc.returncode == 3


def test_a_killed_hooks_run_is_killed_with_its_process_group(served: Served) -> None:
    proc = served.client("wait")
    assert proc.stdout is not None
    while not (line := proc.stdout.readline()).startswith("waiting"):
        assert line
    pids = dict(part.split("=") for part in line.split()[1:])
    run, child = int(pids["pid"]), int(pids["child"])
    proc.kill()
    proc.wait()
    _wait_for(lambda: not _alive(run) and not _alive(child), timeout=10)
    _wait_for(lambda: "(its client was gone)" in served.log(), timeout=10)
    assert "exit code -9" in served.log()


def test_a_run_ended_by_a_signal_ends_the_hook_by_it(served: Served) -> None:
    proc = served.client("die")
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def test_stale_code_is_refused_and_the_hook_runs_the_engine_itself(served: Served, tmp_path: Path) -> None:
    assert served.client("echo", "0").wait(timeout=60) == 0
    served.stamp.write_text("two")  # the code on disk is not the code the warm engine imported
    proc = served.client("echo", "0", KUBECONFIG=str(tmp_path / "none"), BINDING_CONTEXT_PATH="",
                         KS_BASE_DIR=str(tmp_path))
    _, err = proc.communicate(timeout=120)
    # the hook itself ran installer.hook (not the warm engine's target): no cluster to talk to
    assert proc.returncode == 1 and "could not talk to the Kubernetes API" in err, err
    assert "refused a run: the installer's code on disk changed" in served.log()
    assert "stops listening: its code is stale" in served.log()
    served.proc.wait(timeout=10)  # and ends: no run of its own was left
    # the hook started a warm engine with the code on disk for the next run
    _wait_for(lambda: (warm_engine.engine_cpu(str(served.directory)) or (served.proc.pid,))[0] != served.proc.pid,
              timeout=60)


def test_no_warm_engine_or_switched_off_runs_the_hook_itself(tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none"), "KS_BASE_DIR": str(tmp_path),
           warm_client.SWITCH_ENV: "0", warm_client.DIR_ENV: str(tmp_path / "engine")}
    proc = subprocess.run(CLIENT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1 and "could not talk to the Kubernetes API" in proc.stderr
    assert not (tmp_path / "engine").exists()  # switched off: none started


def test_the_code_stamp_changes_with_the_packages_files(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "a.py").write_text("x = 1\n")
    site = tmp_path / "lib" / "site-packages"
    site.mkdir(parents=True)
    first = code_stamp.code_stamp(str(package), [str(tmp_path), str(site)])
    (package / "sub" / "__pycache__").mkdir()
    (package / "sub" / "__pycache__" / "a.pyc").write_text("compiled")
    (tmp_path / "written.txt").write_text("the working directory's own files")
    assert code_stamp.code_stamp(str(package), [str(tmp_path), str(site)]) == first
    os.utime(package / "sub" / "a.py", ns=(1, 1))
    touched = code_stamp.code_stamp(str(package), [str(tmp_path), str(site)])
    assert touched != first
    (site / "newpkg").mkdir()
    os.utime(site, ns=(2, 2))
    assert code_stamp.code_stamp(str(package), [str(tmp_path), str(site)]) != touched


def test_dead_owners_directories_are_removed(tmp_path: Path) -> None:
    prefix = f"{warm_client.DIR_PREFIX}{os.getuid()}"
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"{prefix}-{dead.pid}-1"
    live = tmp_path / f"{prefix}-{os.getpid()}-{warm_client.start_ticks(os.getpid())}"
    for directory in (gone, live):
        directory.mkdir()
        (directory / "engine.log").write_text("")
    warm_engine.remove_dead_dirs(str(tmp_path))
    assert not gone.exists() and live.exists()


@pytest.mark.parametrize("served", [{warm_engine.IDLE_ENV: "1"}], indirect=True)
def test_an_idle_warm_engine_ends(served: Served) -> None:
    assert served.client("echo", "0").wait(timeout=60) == 0
    served.proc.wait(timeout=30)
    assert "stops listening: no run for 1s" in served.log()
    assert not (served.directory / "s").exists()


def test_a_hook_of_another_installer_tree_is_refused(served: Served, tmp_path: Path) -> None:
    """Another checkout's hook (the same interpreter, the same shell-operator) never runs this tree's code."""
    other = tmp_path / "other"
    shutil.copytree(Path(warm_client.__file__).parents[2] / "installer", other / "installer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    proc = served.client("echo", "0", PYTHONPATH=str(other), KUBECONFIG=str(tmp_path / "none"),
                         BINDING_CONTEXT_PATH="", KS_BASE_DIR=str(tmp_path), KS_WARM_ENGINE="1")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "could not talk to the Kubernetes API" in err, err  # ran itself
    assert f"refused a run: the client is another installer's ('{other}/installer/launch/warm_client.py')" \
        in served.log()
