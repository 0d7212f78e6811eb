"""The pod log as the docs show it: the hook's lines as printed, shell-operator's own as ``TIME LEVEL : msg``; the
wrapper passes the pod's SIGTERM on and exits with the operator's code."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import textwrap
import time

from installer.podlog import LINE_CAP, pod_line, relay, shown

# Lines shell-operator v1.6.1 wrote while the hook installed the default platform (its --log-type=json output).
OPERATOR = ('{"level":"info","logger":"shell-operator","msg":"shell-operator v1.6.1",'
            '"time":"2026-11-28T20:24:21Z"}')
SKIPPED = ('{"level":"warn","msg":"file is skipped","error":"no executable permissions, chmod +x is required to run '
           'this hook","path":"/hooks/kubesphere/__pycache__/installRunner.cpython-311.pyc",'
           '"time":"2026-11-28T19:46:59Z"}')
STARTED = ('{"level":"info","logger":"shell-operator.hook-manager.hook.executor","msg":"Start installing preinstall",'
           '"binding":"Monitor clusterconfiguration","event":"kubernetes","hook":"kubesphere/installRunner.py",'
           '"output":"stderr","queue":"main","task":"HookRun","time":"2026-11-28T19:47:07Z"}')
TASK = ('{"level":"info","logger":"shell-operator.hook-manager.hook.executor","msg":"task preinstall status is '
        'successful  (1/4)","binding":"Monitor clusterconfiguration","event":"kubernetes",'
        '"hook":"kubesphere/installRunner.py","output":"stderr","queue":"main","task":"HookRun",'
        '"time":"2026-11-28T19:47:20Z"}')
PROXIED = ('{"level":"warn","logger":"shell-operator.hook-manager.hook.executor","msg":"Reconcile finished, not '
           'Ready: failed: monitoring","binding":"Monitor clusterconfiguration","event":"kubernetes",'
           '"hook":"kubesphere/installRunner.py","output":"stdout","proxyJsonLog":true,"queue":"main",'
           '"task":"HookRun","time":"2026-11-28T19:53:06Z"}')


def test_the_hooks_lines_are_shown_as_the_hook_printed_them() -> None:
    assert pod_line(STARTED) == "Start installing preinstall"
    assert pod_line(TASK) == "task preinstall status is successful  (1/4)"
    assert pod_line(PROXIED) == "Reconcile finished, not Ready: failed: monitoring"


def test_the_operators_own_lines_carry_time_and_level() -> None:
    assert pod_line(OPERATOR) == "2026-11-28T20:24:21Z INFO     : shell-operator v1.6.1"
    assert pod_line(SKIPPED) == ("2026-11-28T19:46:59Z WARN     : file is skipped error=no executable permissions, "
                                 "chmod +x is required to run this hook "
                                 "path=/hooks/kubesphere/__pycache__/installRunner.cpython-311.pyc")


def test_no_value_makes_a_line_of_its_own() -> None:
    forged = STARTED.replace("Start installing preinstall", "x\\nStart installing evil\\u001b[2J")
    assert pod_line(forged) == "x\\x0aStart installing evil\\x1b[2J"
    assert pod_line("plain\rline") == "plain\\x0dline"
    assert pod_line("[1, 2]") == "[1, 2]"


def test_every_field_is_escaped_and_a_line_is_cut_with_a_marker() -> None:
    record = ('{"time": "T\\n2026", "level": "info\\nFAKE", "msg": "a\\u009bb\\u202ec\\u2028d\\u0085e\\tf",'
              '"error": "\\ud800\\u2066"}')
    assert pod_line(record) == "T\\x0a2026 INFO\\x0aFAKE: a\\x9bb\\u202ec\\u2028d\\x85e\\x09f error=\\ud800\\u2066"
    assert shown(b"[" * 100_000) == "[" * 100_000  # nested past the parser: the text it is
    assert shown(b"ok \xff\xc0\xaf") == "ok \\xff\\xc0\\xaf"  # not UTF-8: the bytes as escapes
    assert shown(b"x" * LINE_CAP, 9_934_464) == "x" * LINE_CAP + " [... 9934464 bytes cut]"


class Gone(io.BytesIO):
    def write(self, _data: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_stdout_that_is_gone_stops_the_printing_not_the_reading() -> None:
    stream = io.BytesIO(b"".join(b'{"msg": "line %d"}\n' % i for i in range(1000)))
    relay(stream, Gone())
    assert stream.read() == b""  # read to the end: the operator never blocks on a full pipe


def test_the_wrapper_relays_passes_sigterm_on_and_exits_with_the_operators_code() -> None:
    operator = textwrap.dedent(f"""
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *_: (print("stopping", flush=True), sys.exit(7)))
        print({STARTED!r}, flush=True)
        print({OPERATOR!r}, file=sys.stderr, flush=True)
        time.sleep(60)
    """)
    wrapper = subprocess.Popen([sys.executable, "-m", "installer.podlog", "--", sys.executable, "-c", operator],
                               stdout=subprocess.PIPE, text=True)
    assert wrapper.stdout is not None
    lines = [wrapper.stdout.readline().rstrip("\n") for _ in range(2)]
    assert sorted(lines) == sorted(["Start installing preinstall",
                                    "2026-11-28T20:24:21Z INFO     : shell-operator v1.6.1"])
    started = time.monotonic()
    wrapper.send_signal(signal.SIGTERM)
    rest, _ = wrapper.communicate(timeout=30)
    assert rest == "stopping\n"
    assert wrapper.returncode == 7
    assert time.monotonic() - started < 10


def test_json_format_runs_the_operator_in_its_place() -> None:
    out = subprocess.run([sys.executable, "-m", "installer.podlog", sys.executable, "-c", f"print({STARTED!r})"],
                         capture_output=True, text=True, timeout=30, env={"KS_POD_LOG_FORMAT": "json"}, check=True)
    assert out.stdout == STARTED + "\n"
