"""A fork server for ansible-playbook: the Kubernetes client and the ``ks_*`` tasks' code are imported once per
engine process, not once per module run.

Every module run used to start a new interpreter that imported Ansible, the Kubernetes client (about half a CPU
second of its own) and the tasks' code. The engine now starts one server process (``python -m
installer.launch.forkserver SOCKET``) that imports the Kubernetes client and the tasks' code (never Ansible, which reads
its configuration from the environment when imported) and forks a child for each run. ansible-runner runs a small client
in place of ``ansible-playbook`` (``binary=``); the client hands the server its argv, working directory, environment and
its standard streams (the pty ansible-runner reads), and exits with the child's exit code. The child takes the run's
environment, imports Ansible and runs ``ansible-playbook``'s main.

Cancel and timeout: ansible-runner SIGKILLs the client's process group; the child notices that its client is gone
(its socket closes) and kills itself; Ansible's task workers follow their main process (``ks_preload``). SIGTERM,
SIGINT and SIGHUP sent to the client are passed on to the child. The server ends when the engine closes its end of
the server's control pipe (its stdin) or dies; runs already started finish. ``KS_ANSIBLE_FORKSERVER=0`` runs
``ansible-playbook`` itself.

The engine forks the server from itself before a reconcile takes its Lease (:meth:`ForkServer.prefork`): the engine
has imported the Kubernetes client already, so the server costs neither an interpreter start nor a second import;
it loads the tasks' code at once, on the other core while the engine plans (about 0.17 CPU-s, spent also by a
reconcile that then runs nothing).
Only a process with one thread forks (a fork copies no other thread, and a lock another thread holds stays held in
the child); otherwise the first run starts the server as a new interpreter. The server's children end through CPython's
private exit-handler functions (installer.launch.cpython_private): on an interpreter those were not written for,
``ansible-playbook`` runs itself.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import logging
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, NoReturn

from installer.launch import ansible_playbook, cpython_private
from installer.launch.ansible_playbook import PLAYBOOK

log = logging.getLogger("installer")
SWITCH_ENV = "KS_ANSIBLE_FORKSERVER"
START_TIMEOUT = 60.0
DIR_PREFIX = "ks-ansible-"
"""The server's directory in the temp dir: ``ks-ansible-<engine pid>-<random>`` (its socket and client)."""

#: The client ansible-runner runs as ``ansible-playbook`` (isolated, no site: it imports nothing but the stdlib):
#: ``command`` (an argv prefix) with the client's arguments, run by the server, or by the client itself when no
#: server listens on ``socket``.
CLIENT = '''#!{python} -IS
"""{command[0]}, run by a fork server (installer/launch/forkserver.py)."""
import json, os, signal, socket, struct, sys

COMMAND = {command!r}
try:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect({socket!r})
except OSError:  # no server: run the command itself
    os.execv(COMMAND[0], [*COMMAND, *sys.argv[1:]])
body = json.dumps({{"argv": [*COMMAND, *sys.argv[1:]], "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(sock, [struct.pack("!I", len(body))], [0, 1, 2])
sock.sendall(body)
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(number, lambda n, _frame: sock.send(bytes([n])))
reply = b""
while len(reply) < 4:
    chunk = sock.recv(4 - len(reply))
    if not chunk:
        sys.exit(1)  # the run died without an exit code
    reply += chunk
sys.exit(struct.unpack("!i", reply)[0])
'''


# ---------------------------------------------------------------------------------------------------------- engine


class ForkServer:
    """The engine's side: starts the server on first use; :meth:`client` is what ansible-runner runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None  # a server started as a new interpreter
        self._forked: int | None = None  # the pid of a server forked from this process
        self._control: int | None = None  # the forked server's control pipe (closing it ends the server)
        self._dir: Path | None = None
        self._failed = False

    @property
    def pid(self) -> int | None:
        """The running server's process id."""
        if self._proc is not None:
            return self._proc.pid
        return self._forked

    def _alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        if self._forked is None:
            return False
        try:
            return os.waitpid(self._forked, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return False

    def prefork(self) -> None:
        """Start the server now by forking this process, if it has only one thread (see the module's docstring)."""
        if not enabled() or threading.active_count() != 1:
            return
        with self._lock:
            if self._alive() and self._dir is not None:
                return
            self.stop()
            try:
                self._fork()
            except OSError as exc:
                log.debug("fork server not forked, the first run starts it: %s", exc)
                self.stop()

    def client(self) -> Path | None:
        """The client to run in place of ``ansible-playbook``; None when switched off or the server cannot start
        (ansible-playbook runs itself then)."""
        if not enabled():
            return None
        with self._lock:
            if self._alive() and self._dir is not None:
                return self._dir / "ansible-playbook"
            if self._failed:
                return None
            try:
                self.stop()  # a forked server that died: its directory goes
                return self._start()
            except (OSError, RuntimeError) as exc:
                self._failed = True
                log.debug("fork server not started, ansible-playbook runs itself: %s", exc)
                self.stop()
                return None

    def _prepare(self) -> tuple[Path, Path]:
        """The server's directory with the client in it: the socket's path and the client's."""
        _remove_dead_servers_dirs()
        self._dir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
        sock = self._dir / "s"
        client = self._dir / "ansible-playbook"
        client.write_text(CLIENT.format(python=sys.executable, command=[str(PLAYBOOK)], socket=str(sock)))
        client.chmod(0o700)
        return sock, client

    def _fork(self) -> None:
        sock, _ = self._prepare()
        listener = _listen(str(sock))
        control, control_end = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the server: never returns into the engine's code
            code = 1
            try:
                os.close(control_end)
                _become_server(str(sock))
                preload()  # while the engine plans, on the other core
                serve_on(listener, control, loaded=True)
                code = 0
            finally:
                os._exit(code)
        os.close(control)
        listener.close()
        self._forked, self._control = pid, control_end
        atexit.register(self.stop)

    def _start(self) -> Path:
        sock, client = self._prepare()
        self._proc = subprocess.Popen([sys.executable, "-m", "installer.launch.forkserver", str(sock)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], START_TIMEOUT)
        if not ready or self._proc.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the fork server did not start within {START_TIMEOUT:g}s")
        atexit.register(self.stop)
        return client

    def stop(self) -> None:
        """End the server (runs it started finish on their own) and remove its socket and client."""
        forked, self._forked = self._forked, None
        if self._control is not None:
            with contextlib.suppress(OSError):
                os.close(self._control)
            self._control = None
        if forked is not None:
            _wait_or_kill(forked, 10.0)
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


SERVER = ForkServer()


def enabled() -> bool:
    """Whether runs go through the server: not switched off (``KS_ANSIBLE_FORKSERVER=0``), and on an interpreter
    whose private exit-handler functions the server's children use (installer.launch.cpython_private)."""
    if os.environ.get(SWITCH_ENV, "1") == "0":
        return False
    if not cpython_private.written_for():
        implementation, (major, minor) = cpython_private.python_version()
        log.debug("no fork server on %s %d.%d: ansible-playbook runs itself", implementation, major, minor)
        return False
    return True


def _wait_or_kill(pid: int, timeout: float) -> None:
    """Collect the forked server; SIGKILL it if it has not ended within ``timeout`` seconds. Its end is waited for
    on a pidfd (woken the moment it exits: the engine's exit waits for this), else polled."""
    with contextlib.suppress(ChildProcessError):
        if not _ended_within(pid, timeout):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _ended_within(pid: int, timeout: float) -> bool:
    """Whether child ``pid`` ends (or has ended) within ``timeout`` seconds; not collected."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # a kernel before 5.3: poll, each wait longer than the last
        deadline, pause = time.monotonic() + timeout, 0.001
        while time.monotonic() < deadline:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        return False
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def _remove_dead_servers_dirs() -> None:
    """Remove the socket and client a killed engine (no clean-up at exit) left in the temp dir."""
    for found in Path(tempfile.gettempdir()).glob(f"{DIR_PREFIX}*-*"):
        pid = found.name.removeprefix(DIR_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(found, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------- server


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the client went away")
        data += chunk
    return data


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1] == os.getuid()


def _text_stream(fd: int) -> IO[str]:
    return io.TextIOWrapper(io.FileIO(fd, "w" if fd else "r", closefd=False), encoding="utf-8",
                            errors="backslashreplace", line_buffering=True, write_through=bool(fd))


def _watch(conn: socket.socket) -> None:
    """Pass on the signals the client got; end this run when the client is gone (killed by a cancel)."""
    while True:
        try:
            data = conn.recv(16)
        except OSError:
            data = b""
        if not data:
            os.kill(os.getpid(), signal.SIGKILL)
        for number in data:
            os.kill(os.getpid(), number)


def _title(argv: list[str]) -> None:
    """Show the run's command line in ``ps`` (and /proc/PID/cmdline), for the child and its task workers."""
    with contextlib.suppress(ImportError):
        import setproctitle

        setproctitle.setproctitle(" ".join(argv))


def take_over(conn: socket.socket, title: list[str] | None = None) -> list[str]:
    """In a child forked for a client: receive its request and take its standard streams, working directory and
    environment (``$KUBECONFIG`` included); its argv. ``title`` (default: the argv) is what ``ps`` shows."""
    fds, request = receive(conn)
    os.setsid()
    adopt(fds, request, title)
    return list(request["argv"])


def receive(conn: socket.socket) -> tuple[list[int], dict[str, Any]]:
    """A client's request (:data:`CLIENT`'s): its standard streams' descriptors and the JSON body."""
    header, fds, _, _ = socket.recv_fds(conn, 4, 3)
    try:
        if len(fds) != 3:
            raise EOFError(f"the client sent {len(fds)} descriptors, not its 3 standard streams")
        header += _recv_exactly(conn, 4 - len(header))
        request = json.loads(_recv_exactly(conn, struct.unpack("!I", header)[0]))
        if not isinstance(request, dict):
            raise ValueError("the request is not a JSON object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds, request


def adopt(fds: list[int], request: dict[str, Any], title: list[str] | None = None) -> None:
    """Make this process the client's: ``fds`` as its standard streams (closed after), the request's working
    directory and environment; ``title`` (default: the argv) is what ``ps`` shows."""
    for target, fd in zip((0, 1, 2), fds, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin, sys.stdout, sys.stderr = _text_stream(0), _text_stream(1), _text_stream(2)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    _title(title or request["argv"])  # before the environment changes: it finds the title's memory through it
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    from kubernetes.config import kube_config  # read $KUBECONFIG when imported, in the server's environment

    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = os.environ.get("KUBECONFIG", "~/.kube/config")


def finish(conn: socket.socket, code: int) -> NoReturn:
    """End a forked child: the exit handlers it registered, its streams flushed, ``code`` to the client."""
    with contextlib.suppress(Exception):
        cpython_private.run_exit_handlers()  # Ansible's and kubernetes' clean-up (temp dirs, certificate files)
        sys.stdout.flush()
        sys.stderr.flush()
    with contextlib.suppress(OSError):
        conn.sendall(struct.pack("!i", code))
    os._exit(code & 0xFF)


def _child(conn: socket.socket) -> NoReturn:
    """In the forked child: become the client's ``ansible-playbook`` and exit with its code."""
    code = 1
    try:
        argv = take_over(conn)
        threading.Thread(target=_watch, args=(conn,), daemon=True).start()
        code = ansible_playbook.main(argv)
    except BaseException as exc:  # whatever happened, the client gets an exit code
        with contextlib.suppress(Exception):
            print(f"ansible-playbook (fork server): {type(exc).__name__}: {exc}", file=sys.stderr)
    finish(conn, code)


def preload() -> None:
    """What every run needs and that reads no environment when imported: the Kubernetes client and the ``ks_*``
    tasks' code (not their action plugins' base, which imports Ansible); then installer.launch.ansible_patches."""
    import jinja2  # noqa: F401
    import yaml  # noqa: F401

    from installer.ansible_tasks._preload import import_tasks
    from installer.engine_settings import Settings
    from installer.launch import ansible_patches

    import_tasks(base=False)
    ansible_patches.apply(Settings.from_env().template_cache)


def _reap(grace: float = 0.0) -> None:
    """Collect the runs that ended (their CPU time then counts as the server's children's, and the engine's),
    waiting up to ``grace`` seconds for those still running."""
    deadline = time.monotonic() + grace
    with contextlib.suppress(ChildProcessError):
        while True:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)


def _listen(path: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    return listener


def _become_server(path: str) -> None:
    """In a server forked from the engine: a session of its own, default signal handling, none of the engine's exit
    handlers (its runs run the exit handlers they register), nothing written to the engine's stdout."""
    os.setsid()
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    cpython_private.clear_exit_handlers()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    _title([sys.executable, "-m", "installer.launch.forkserver", path])


def serve(path: str) -> None:
    """Listen on ``path`` and fork a child per client, until stdin closes."""
    listener = _listen(path)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    serve_on(listener, sys.stdin.fileno())


def serve_on(listener: socket.socket, control: int, loaded: bool = False) -> None:
    """Fork a child per client of ``listener``, until ``control`` (a pipe's read end) reaches its end. What every run
    needs is loaded before the first child, unless ``loaded`` already."""
    while True:
        _reap()
        ready, _, _ = select.select([listener, control], [], [], 1.0)
        if control in ready and not os.read(control, 1):
            break
        if listener in ready:
            conn, _ = listener.accept()
            if not _same_user(conn):
                conn.close()
                continue
            if not loaded:
                preload()
                loaded = True
            if os.fork() == 0:
                listener.close()
                _child(conn)
            conn.close()
    _reap(grace=5.0)  # the engine stops the server after its runs: their children are exiting


if __name__ == "__main__":
    serve(sys.argv[1])
