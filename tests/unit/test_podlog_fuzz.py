"""The pod log's relay as the image runs it, PID 1 of its own PID namespace (``unshare --pid``, the Dockerfile's
``python3 -I -m installer.podlog``), under a hostile operator: deep nesting, lines of megabytes, random bytes, invalid
UTF-8, controls, bidi and separators in every field, forged newlines. It lives on, prints one line per input line,
each starting as the relay starts that record, none with a character that is not printable, none over its cap."""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import IO

from installer.podlog import LINE_CAP, cut_marker

SEED = 57
#: Characters that make, hide or reorder a line on a terminal or in a log viewer.
EVIL = ["\n", "\r", "\r\n", "\x00", "\x07", "\t", "\x0b", "\x0c", "\x1b[2J", "\x1b]0;title\x07", "\x7f", "\x85",
        "\x9b31m", "\x9d", "\u2028", "\u2029", "\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c", "\ufeff",
        "\ud800", "\udfff", "\U000e0001"]
#: What a forger puts after a newline: a line as the relay prints an operator's record, or as the hook prints one.
FORGED = ["2026-01-01T00:00:00Z ERROR    : FORGED", "FORGED task ks-core status is failed"]
FIELDS = ["time", "level", "msg", "error", "hook", "binding", "name", "path", "address", "module", "logger", "extra"]
CANARY = "CANARY the relay still runs"

OPERATOR = textwrap.dedent("""
    import json, os, subprocess, sys, time
    out = sys.stdout.buffer
    with open(sys.argv[1], "rb") as corpus:
        for line in corpus.read().split(b"\\n")[:-1]:
            out.write(line + b"\\n")
    out.flush()
    for _ in range(5):  # orphans for PID 1 to reap
        subprocess.run(["sh", "-c", "sleep 0.05 & exit 0"], check=True)
    time.sleep(0.5)
    zombies = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            zombies += open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            pass
    for name, msg in (("PARENT", os.getppid()), ("ZOMBIES", zombies), ("CANARY", %r)):
        out.write(json.dumps({"time": name, "level": "info", "msg": str(msg)}).encode() + b"\\n")
    out.flush()
    sys.stdin.buffer.read()  # until the test closes it
    sys.exit(7)
""") % CANARY


def corpus(rng: random.Random) -> list[tuple[bytes, tuple[str, ...]]]:
    """Lines (no newline inside) and the ways the relay's line for each may start (its tag, formatted or raw)."""
    out: list[tuple[bytes, tuple[str, ...]]] = []

    def add(data: bytes, *starts: str) -> None:
        assert b"\n" not in data
        out.append((data, starts))

    add(b"[" * 100_000, "[[[[")
    add(b"{" * 100_000, "{{{{")
    add(b'{"time": "T-deep", "msg": "m", "error": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", '{"time": "T-deep"')
    add(b'{"time": "T-deepmap", "msg": ' + b'{"a": ' * 9_000 + b"1" + b"}" * 9_000 + b"}", '{"time": "T-deepmap"')
    add(b'{"time": "T-bigint", "msg": 1' + b"1" * 5_000 + b"}", '{"time": "T-bigint"')
    add(b"R-huge " + b"a" * (10 << 20), "R-huge aaaa")
    add(b"R-cap " + b"b" * (LINE_CAP - 6), "R-cap bbbb")
    add(b"R-cap1 " + b"c" * (LINE_CAP - 6), "R-cap1 cccc")
    add(b"R-zeros " + b"\x00" * (2 * LINE_CAP), "R-zeros \\x00")
    add(b'{"time": "T-escapes", "msg": "' + b"\\u001b" * 10_000 + b'"}', "T-escapes INFO     : \\x1b")
    add(b"", "")
    add(b"\r", "")
    add(b'["L-list", 1]', '["L-list"')
    add(b'"S-string\\n2026-01-01T00:00:00Z ERROR    : FORGED"', '"S-string\\n')
    add(b"R-utf8 \xff\xfe \xc0\xaf \xed\xa0\x80 \x80 \xf4\x90\x80\x80", "R-utf8 \\xff\\xfe")
    for i in range(60):
        noise = bytes(rng.randrange(256) for _ in range(rng.choice([1, 50, 2_000, 70_000])))
        add(f"R{i} ".encode() + noise.replace(b"\n", b"\x0b"), f"R{i} ")
    for i, field in enumerate(FIELDS * 3):
        evil = rng.choice(EVIL) + rng.choice(FORGED) + rng.choice(EVIL)
        value = (f"T{i}" if field == "time" else "info" if field == "level" else f"v{i}") + evil
        record = {"time": f"T{i}", "level": "info", "msg": f"m{i}", field: value}
        hooked = i % 3 == 0
        if hooked:  # a line the hook printed: the relay shows its message alone
            record = {"msg": f"M{i}" + (evil if field == "msg" else ""), "hook": "installRunner.py",
                      "output": "stderr", field: value if field != "msg" else f"M{i}{evil}"}
        ascii_json = json.dumps(record)  # escapes as JSON writes them
        raw_json = json.dumps(record, ensure_ascii=False)  # the characters themselves: controls make it invalid
        tag = f"M{i}" if hooked else f"T{i}"
        first = next(iter(record))
        for text in (ascii_json, raw_json):
            data = text.encode("utf-8", "surrogatepass").replace(b"\n", b"\\n")
            add(data, tag, f'{{"{first}": "{tag}')
    return out


def unprintable(text: str) -> list[str]:
    return sorted({repr(c) for c in text if not c.isprintable()})


def test_the_relay_as_pid_1_survives_a_hostile_operator_and_forges_no_line(tmp_path: Path) -> None:
    lines = corpus(random.Random(SEED))
    (tmp_path / "corpus").write_bytes(b"".join(data + b"\n" for data, _ in lines))
    (tmp_path / "hostile_operator.py").write_text(OPERATOR)
    isolate = ["unshare", "--fork", "--pid", "--mount-proc"]
    if os.geteuid() != 0:
        isolate[1:1] = ["--user", "--map-root-user"]
    relay = subprocess.Popen([*isolate, sys.executable, "-I", "-m", "installer.podlog", sys.executable,
                              str(tmp_path / "hostile_operator.py"), str(tmp_path / "corpus")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert relay.stdin is not None and relay.stdout is not None
    printed: queue.Queue[bytes | None] = queue.Queue()

    def read(stream: IO[bytes]) -> None:
        for line in stream:
            printed.put(line)
        printed.put(None)

    threading.Thread(target=read, args=(relay.stdout,), daemon=True).start()
    shown: list[bytes] = []
    try:
        while not shown or CANARY.encode() not in shown[-1]:
            line = printed.get(timeout=120)
            assert line is not None, f"the relay stopped (exit {relay.wait()}) after {len(shown)} lines"
            shown.append(line)
        assert relay.poll() is None  # the relay, PID 1, runs on after the corpus
    finally:
        relay.stdin.close()
    assert relay.wait(timeout=60) == 7  # the operator's code, once it exits
    assert [line.endswith(b"\n") for line in shown] == [True] * len(shown)
    text = [line[:-1].decode("utf-8") for line in shown]  # valid UTF-8, whatever came in

    *relayed, parent, zombies, canary = text
    assert (parent, zombies, canary) == ("PARENT INFO     : 1", "ZOMBIES INFO     : 0", f"CANARY INFO     : {CANARY}")
    assert len(relayed) == len(lines)  # one line out per line in: nothing lost, nothing forged
    for (data, starts), line in zip(lines, relayed, strict=True):
        assert line.startswith(starts), (line[:80], starts)
        assert not unprintable(line), (line[:80], unprintable(line))
        assert len(line) <= 4 * LINE_CAP + 40, (line[:80], len(line))
        if len(data) > LINE_CAP:
            assert line.endswith(cut_marker(len(data) - LINE_CAP)), (line[:40], line[-40:])
    assert not any(line.startswith(("2026-01-01T00:00:00Z", "FORGED")) for line in text)
