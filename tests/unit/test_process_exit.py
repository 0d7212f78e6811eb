"""The engine's exit without the interpreter's teardown: the exit code, threads, exit handlers and logs as a normal
exit leaves them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_exit_now_finishes_threads_handlers_and_logs_first(tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import atexit, logging, threading, time
        from concurrent.futures import ThreadPoolExecutor
        from installer.process_exit import exit_now

        pool = ThreadPoolExecutor(2)  # left idle, never shut down: must not hold the exit
        pool.submit(lambda: None).result()
        def late():
            time.sleep(0.3)
            open({str(out)!r}, "a").write("thread\\n")
        threading.Thread(target=late).start()
        atexit.register(lambda: open({str(out)!r}, "a").write("handler\\n"))
        logging.basicConfig(filename={str(tmp_path / "log")!r}, level=logging.INFO)
        logging.getLogger("installer").info("last line")
        print("stdout text", end="")
        exit_now(3)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "stdout text"
    assert out.read_text() == "thread\nhandler\n"
    assert "last line" in (tmp_path / "log").read_text()
