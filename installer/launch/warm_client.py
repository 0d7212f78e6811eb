"""The hook's own process: hand the run to the warm engine (installer.launch.warm_engine), or run it here.

A hook run is a new interpreter; the engine's imports (the Kubernetes client alone about 0.25 s) would be paid on
every run. The warm engine is a process that imported them once and forks a child per hook run. This module is all
the hook imports when one listens (only built-in modules: ``_socket``, ``_signal`` and ``marshal``, the C modules
under the standard library's socket and signal, whose Python layers and enums cost the hook more than the rest of
its work; about 0.4 ms against 5 to 10 ms): it connects to the warm
engine of its shell-operator, hands over its argv, working directory, environment and standard streams (the
descriptors, over the Unix socket: what shell-operator reads is the run's own output), passes on SIGTERM, SIGINT and
SIGHUP, and exits with the run's exit code (or by the signal that ended the run).

With no warm engine listening (the first run, ``KS_WARM_ENGINE=0``, a warm engine that found its code older than
the files on disk, any error before the run started) the hook runs the engine in its own process, as a hook without
a warm engine does; and, unless switched off, starts a warm engine for the next runs. See docs/warm-engine.md.
"""

from __future__ import annotations

import _signal
import _socket
import marshal
import os
import sys

TYPE_CHECKING = False  # typing's import would cost the hook more than its own work
if TYPE_CHECKING:
    from typing import NoReturn

SWITCH_ENV = "KS_WARM_ENGINE"
DIR_ENV = "KS_WARM_ENGINE_DIR"
"""The warm engine's directory, when not the default (:func:`engine_dir`)."""
DIR_PREFIX = "ks-engine-"
#: Signals passed on to the run (shell-operator stops its hooks with SIGTERM, a terminal with SIGINT).
FORWARDED = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
#: The warm engine's answers: the run started; no run (the client runs the engine itself); the run's exit code.
RUNNING, REFUSED, EXITED = b"R", b"F", b"X"
#: Seconds the hook waits for the warm engine to start its run (it answers before it forks); past them the hook
#: gives up on it (a warm engine that hangs) and runs the engine itself.
ANSWER_TIMEOUT = 30.0


def enabled(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return environ.get(SWITCH_ENV, "1") != "0"


def start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat's 22nd field); None when it is gone.
    With the pid it names one process, whatever pid is reused later."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def engine_dir(owner: int, ticks: str | None = None) -> str:
    """The warm engine's directory (its socket, lock, pid and log) for hooks run by process ``owner``
    (shell-operator): ``$TMPDIR/ks-engine-<uid>-<owner pid>-<owner start>``."""
    ticks = ticks if ticks is not None else start_ticks(owner) or "0"
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, f"{DIR_PREFIX}{os.getuid()}-{owner}-{ticks}")


def _connect(path: str) -> _socket.socket | None:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def _recv_exactly(sock: _socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except InterruptedError:
            continue
        if not chunk:
            return None
        data += chunk
    return data


class Handover:
    """One run handed to the warm engine listening on ``path``: :meth:`start` sends the request, :meth:`wait` the
    exit code. Signals that arrive meanwhile are passed on once the run started, raised here again otherwise."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.pending: list[int] = []
        self.started = False

    def _signalled(self, number: int, _frame: object) -> None:
        if not self.started:
            self.pending.append(number)
            return
        try:
            self.sock.send(bytes([number]))
        except OSError:  # the run is gone: its exit (or the connection's end) decides
            self.pending.clear()

    def start(self, argv: list[str]) -> bool:
        """Hand the run over; False when the warm engine refused it (or went away before it started)."""
        for number in FORWARDED:
            _signal.signal(number, self._signalled)
        body = marshal.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "python": sys.executable,
                              "code": __file__})
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
        try:
            self.sock.sendmsg([len(body).to_bytes(4, "big")], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
            self.sock.sendall(body)
            self.sock.settimeout(ANSWER_TIMEOUT)
            answer = _recv_exactly(self.sock, 1)
            self.sock.settimeout(None)
        except OSError:  # a timeout too
            answer = None
        if answer != RUNNING:
            self._restore()
            return False
        self.started = True
        for number in self.pending:  # arrived while the run was being set up: the run gets them
            self._signalled(number, None)
        return True

    def _restore(self) -> None:
        """Default handling again; a signal that arrived meanwhile ends this process as it would have."""
        self.sock.close()
        for number in FORWARDED:
            _signal.signal(number, _signal.default_int_handler if number == _signal.SIGINT else _signal.SIG_DFL)
        for number in self.pending:
            os.kill(os.getpid(), number)

    def wait(self) -> int:
        """The run's exit code: negative when a signal ended it; 1 when it ended without one (killed with its
        warm engine)."""
        answer = _recv_exactly(self.sock, 5)
        if answer is None or answer[:1] != EXITED:
            print("ks-installer: the warm engine's run ended without an exit code", file=sys.stderr)
            return 1
        return int.from_bytes(answer[1:], "big", signed=True)


def spawn(directory: str, owner: int, ticks: str) -> None:
    """Start a warm engine for ``owner``'s hooks in the background: a process of its own session (a grandchild,
    so this one never waits for it), its output to its log in ``directory``."""
    try:
        pid = os.fork()
    except OSError:
        return
    if pid:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # collected already
            return
        return
    try:  # the first child: only starts the engine's process and exits
        os.setsid()
        if os.fork():
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        log = os.open(os.path.join(directory, "engine.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, 256)
        # -P: the working directory (the hook's) is not on the import path, as it is not for the hook's script
        os.execv(sys.executable, [sys.executable, "-P", "-m", "installer.launch.warm_engine", directory, str(owner),
                                  ticks])
    finally:
        os._exit(1)


def run_here(argv: list[str]) -> NoReturn:
    """The engine in this process (the hook without a warm engine)."""
    from installer.hook import main
    from installer.process_exit import exit_now

    exit_now(main(argv))


def exit_as(code: int) -> NoReturn:
    """Exit with ``code``; a negative one (the run was ended by that signal) by the same signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        if -code != _signal.SIGKILL:  # its handling cannot change
            _signal.signal(-code, _signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code  # a signal that does not end a process
    os._exit(code & 0xFF)


def main(argv: list[str]) -> NoReturn:
    """The hook: through the warm engine when one listens, else here (and a warm engine started for next time)."""
    if "--config" in argv or not enabled():
        run_here(argv)
    owner = os.getppid()
    ticks = start_ticks(owner)
    if ticks is None:  # no parent to live beside: nothing to keep warm for
        run_here(argv)
    directory = os.environ.get(DIR_ENV) or engine_dir(owner, ticks)
    sock = _connect(os.path.join(directory, "s"))
    if sock is not None:
        handover = Handover(sock)
        if handover.start([sys.argv[0], *argv]):
            exit_as(handover.wait())
    spawn(directory, owner, ticks)
    run_here(argv)
