"""The warm engine: a process that has imported the engine once and forks a child per hook run.

``python -m installer.launch.warm_engine DIR OWNER TICKS`` is started by the hook (installer.launch.warm_client) when
none listens for the hook's parent (shell-operator: process ``OWNER``, started at ``TICKS``). It takes ``DIR/lock``
(one warm engine per directory), stamps its code (installer.launch.code_stamp), imports the engine, the Kubernetes
client and what the Ansible fork server loads, and listens on ``DIR/s``. Per client it

- receives the client's request (argv, working directory, environment, interpreter; :func:`receive`) and its
  standard streams;
- refuses it (the client runs the engine itself) when the client's interpreter is another one, when this process
  is not single-threaded, or when the code on disk is not the code it imported; that last one also ends the warm
  engine (it stops listening at once; the client starts a new one);
- otherwise forks a child that becomes the hook's run: a session of its own, default signal handling, the client's
  streams, directory and environment, ``installer.hook.main`` with the client's argv, and the hook's exit
  (installer.process_exit). It is single-threaded, so its reconcile forks the Ansible fork server from itself.

While the run lasts, the warm engine passes on the signals its client forwards (SIGTERM: the run is cancelled as a
hook's is) and, when the client's connection ends before the run did (the hook was killed), SIGKILLs the run's
process group, as killing the hook would have killed the engine in it. Once the run ended, its exit code (negative:
the signal that ended it) goes to the client. The warm engine ends when its owner is gone, when its socket is no
longer the one on disk, when its code is stale, or after an hour without a run; runs it started finish first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import marshal
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from installer.launch import cpython_private, forkserver, warm_client
from installer.launch.code_stamp import code_stamp
from installer.launch.warm_client import DIR_PREFIX, EXITED, FORWARDED, REFUSED, RUNNING, start_ticks

#: Seconds a client has to send its request once connected.
REQUEST_TIMEOUT = 10.0
#: Seconds between the checks of the owner and the socket.
CHECK_INTERVAL = 1.0
#: Seconds without a run after which the warm engine ends (``KS_WARM_ENGINE_IDLE``; shell-operator's schedule runs the
#: hook every minute, so in the pod it does not; a hook run by hand or by a parent that lives on does).
IDLE_ENV, IDLE_DEFAULT = "KS_WARM_ENGINE_IDLE", 3600.0
#: Bytes the warm engine's log may grow to before it starts over (a line per run: the schedule's run every minute).
LOG_CAP = 1 << 20


def say(message: str) -> None:
    """A line of the warm engine's log (``DIR/engine.log``, its stderr); past :data:`LOG_CAP` it starts over."""
    with contextlib.suppress(OSError, ValueError):
        if os.fstat(2).st_size > LOG_CAP:
            os.ftruncate(2, 0)
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} warm engine {os.getpid()}: "
                         f"{message}\n")
        sys.stderr.flush()


def hook_main(argv: list[str]) -> int:
    """What a run runs: the hook's main (installer.hook), with the hook's argv."""
    from installer.hook import main

    return main(argv)


def preload() -> None:
    """What a hook run imports, imported once: the hook, the fast path, the reconcile and the Kubernetes client, and
    what the Ansible fork server loads (installer.launch.forkserver.preload; none of it reads the environment when
    imported), with the files every run parses (ansible_patches.cache_definitions)."""
    import jinja2  # noqa: F401
    import kubernetes.client  # noqa: F401
    import yaml  # noqa: F401

    import installer.engine.fastpath
    import installer.engine.lease
    import installer.engine.reconcile
    import installer.engine.retry
    import installer.engine.status
    import installer.hook
    import installer.hook_api
    import installer.objects.cluster
    import installer.objects.kube
    import installer.process_exit  # noqa: F401
    from installer.ansible_tasks._preload import import_tasks
    from installer.launch.ansible_patches import cache_definitions

    import_tasks(base=False)
    cache_definitions()


@dataclass
class Run:
    """One hook run: the forked child, a descriptor that is readable once it ended, and its client's connection."""

    pid: int
    exited: int
    conn: socket.socket | None


class WarmEngine:
    """The server's loop; see the module's docstring."""

    def __init__(self, directory: str, owner: int, ticks: str, stamp: str, lock: int,
                 target: Callable[[list[str]], int] = hook_main, stamp_of: Callable[[], str] = code_stamp) -> None:
        """Serve in ``directory`` while process ``owner`` (started at ``ticks``) lives, runs of ``target`` while
        ``stamp_of()`` is ``stamp``; ``lock`` is the directory's lock, held."""
        self.directory, self.owner, self.ticks, self.stamp, self.lock = directory, owner, ticks, stamp, lock
        self.target, self.stamp_of = target, stamp_of
        self.path = os.path.join(directory, "s")
        self.listener: socket.socket | None = None
        self.inode = 0
        self.runs: list[Run] = []
        self.checked = 0.0
        self.active = time.monotonic()
        try:
            self.idle = float(os.environ.get(IDLE_ENV, IDLE_DEFAULT))
        except ValueError:
            self.idle = IDLE_DEFAULT

    def listen(self) -> None:
        """Bind a socket of its own and move it into place (a client never finds a half-made one)."""
        path = f"{self.path}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(64)
        os.rename(path, self.path)
        self.listener, self.inode = listener, os.stat(self.path).st_ino
        pid_file = os.path.join(self.directory, "pid")
        with open(f"{pid_file}.tmp", "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(f"{pid_file}.tmp", pid_file)

    def stop_listening(self, why: str) -> None:
        """No new runs: the socket goes (if still this one's), the lock too (a new warm engine may start)."""
        if self.listener is None:
            return
        say(f"stops listening: {why}")
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        self.listener.close()
        self.listener = None
        os.close(self.lock)

    def _check(self) -> None:
        """Stop listening when the owner is gone or the socket on disk is not this one."""
        now = time.monotonic()
        if self.listener is None or now - self.checked < CHECK_INTERVAL:
            return
        self.checked = now
        if self.runs:
            self.active = now
        elif now - self.active > self.idle:
            self.stop_listening(f"no run for {self.idle:g}s")
            return
        if start_ticks(self.owner) != self.ticks:
            self.stop_listening(f"its owner (process {self.owner}) is gone")
            return
        try:
            same = os.stat(self.path).st_ino == self.inode
        except OSError:
            same = False
        if not same:
            self.stop_listening(f"{self.path} is no longer its socket")

    def serve(self) -> None:
        self.listen()
        say(f"listens on {self.path} for the hooks of process {self.owner}")
        while self.listener is not None or self.runs:
            readable: list[Any] = [self.listener] if self.listener is not None else []
            readable += [run.exited for run in self.runs]
            readable += [run.conn for run in self.runs if run.conn is not None]
            ready, _, _ = select.select(readable, [], [], CHECK_INTERVAL)
            for run in list(self.runs):
                if run.exited in ready:
                    self._ended(run)
                elif run.conn is not None and run.conn in ready:
                    self._client_spoke(run)
            if self.listener is not None and self.listener in ready:
                self._accept()
            self._check()
        say("ends")

    def _client_spoke(self, run: Run) -> None:
        """Signals to pass on, or the end of the connection: the hook was killed, so is its run."""
        assert run.conn is not None
        try:
            data = run.conn.recv(64)
        except OSError:
            data = b""
        if not data:
            run.conn.close()
            run.conn = None
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(run.pid, signal.SIGKILL)
            return
        for number in data:
            if number in FORWARDED:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(run.pid, number)

    def _ended(self, run: Run) -> None:
        """Collect the run (its CPU time counts as this process' children's) and tell its client how it ended."""
        self.runs.remove(run)
        os.close(run.exited)
        try:
            _, status, usage = os.wait4(run.pid, 0)
            code = os.waitstatus_to_exitcode(status)
            say(f"run {run.pid} ended: exit code {code}, {usage.ru_utime + usage.ru_stime:.2f} CPU-s"
                + ("" if run.conn is not None else " (its client was gone)"))
        except ChildProcessError:
            code = 1
        if run.conn is not None:
            with contextlib.suppress(OSError):
                run.conn.sendall(EXITED + struct.pack("!i", code))
            run.conn.close()

    def _refusal(self, request: dict[str, Any]) -> str | None:
        if request.get("python") != sys.executable:
            return f"the client runs {request.get('python')!r}, not {sys.executable}"
        if request.get("code") != warm_client.__file__:
            return f"the client is another installer's ({request.get('code')!r}), not {warm_client.__file__}"
        if threading.active_count() != 1:
            return "more than one thread"
        if self.stamp_of() != self.stamp:
            return "the installer's code on disk changed since it was imported"
        return None

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        fds: list[int] = []
        handed = False
        try:
            if not forkserver._same_user(conn):
                return
            conn.settimeout(REQUEST_TIMEOUT)
            fds, request = receive(conn)
            reason = self._refusal(request)
            if reason is not None:
                say(f"refused a run: {reason}")
                if "changed" in reason:
                    self.stop_listening("its code is stale")
                conn.sendall(REFUSED)
                return
            conn.sendall(RUNNING)
            self._start(conn, fds, request)
            handed = True  # the run's connection now
        except (OSError, EOFError, ValueError, KeyError) as exc:
            say(f"a client's request failed: {type(exc).__name__}: {exc}")
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if not handed:
                conn.close()

    def _start(self, conn: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
        """Fork the run; a fork that fails is the run's exit code 1."""
        try:
            pid = os.fork()
        except OSError as exc:
            say(f"fork failed: {exc}")
            conn.sendall(EXITED + struct.pack("!i", 1))
            raise
        if pid == 0:
            self._child(conn, fds, request)
        conn.setblocking(True)
        self.runs.append(Run(pid, os.pidfd_open(pid), conn))

    def _child(self, conn: socket.socket, fds: list[int], request: dict[str, Any]) -> NoReturn:
        """In the fork: become the hook's run, with none of the warm engine's descriptors, handlers or lock."""
        code = 1
        try:
            conn.close()
            if self.listener is not None:
                self.listener.close()
                os.close(self.lock)
            for run in self.runs:
                os.close(run.exited)
                if run.conn is not None:
                    run.conn.close()
            os.setsid()
            for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(number, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            cpython_private.clear_exit_handlers()
            forkserver.adopt(fds, request)
            fds.clear()
            argv = [str(arg) for arg in request["argv"]]
            sys.argv = argv
            from installer.process_exit import exit_now

            exit_now(self.target(argv[1:]))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # as the interpreter reports an uncaught exception
            with contextlib.suppress(Exception):
                traceback.print_exc()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code & 0xFF)


def receive(conn: socket.socket) -> tuple[list[int], dict[str, Any]]:
    """A client's request: its standard streams' descriptors and its body (installer.launch.warm_client: a
    ``marshal``-ed dict of plain values, from a client of this user, :func:`forkserver._same_user`)."""
    header, fds, _, _ = socket.recv_fds(conn, 4, 3)
    try:
        if len(fds) != 3:
            raise EOFError(f"the client sent {len(fds)} descriptors, not its 3 standard streams")
        header += forkserver._recv_exactly(conn, 4 - len(header))
        request = marshal.loads(forkserver._recv_exactly(conn, int.from_bytes(header, "big")))
        if not isinstance(request, dict):
            raise ValueError("the request is not a dict")
        json.dumps(request)  # plain values only: strings, lists and dicts of them
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds, request


def engine_cpu(directory: str) -> tuple[int, float] | None:
    """The warm engine in ``directory``: its pid and the CPU seconds it and the runs it collected used so far
    (user and system; /proc/PID/stat), or None when none runs there."""
    try:
        with open(os.path.join(directory, "pid")) as f:
            pid = int(f.read())
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, ValueError):
        return None
    return pid, sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def remove_dead_dirs(tmp: str) -> None:
    """Remove the directories of warm engines whose owner is gone (a killed pod's /tmp is its own; a machine's is
    shared)."""
    prefix = f"{DIR_PREFIX}{os.getuid()}-"
    with contextlib.suppress(OSError), os.scandir(tmp) as entries:
        for entry in entries:
            if not entry.name.startswith(prefix):
                continue
            owner, _, ticks = entry.name.removeprefix(prefix).partition("-")
            if owner.isdigit() and start_ticks(int(owner)) != ticks and not _locked(entry.path):
                for name in ("s", "pid", "lock", "engine.log"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(entry.path, name))
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


def _locked(directory: str) -> bool:
    """Whether a warm engine still holds ``directory``'s lock (it serves its last runs)."""
    try:
        fd = os.open(os.path.join(directory, "lock"), os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def take_lock(directory: str) -> int | None:
    """``directory`` (made private to this user) and its lock, or None when another warm engine holds it."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.stat(directory)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{directory} is not this user's private directory")
    fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def main(argv: list[str]) -> int:
    directory, owner, ticks = argv
    if not cpython_private.written_for():
        say("not on this interpreter (its runs end through CPython's private exit functions)")
        return 1
    lock = take_lock(directory)
    if lock is None:
        return 0  # another one serves this owner
    os.chdir("/")
    remove_dead_dirs(os.path.dirname(directory))
    stamp = code_stamp()
    started = time.process_time()
    preload()
    if code_stamp() != stamp:
        say("the installer's code changed while it was imported: not serving")
        return 1
    say(f"imported the engine in {time.process_time() - started:.2f} CPU-s")
    WarmEngine(directory, int(owner), ticks, stamp, lock).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
