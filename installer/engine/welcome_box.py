"""The welcome box's text, its file and its log lines; no Kubernetes client (the hook's fast path uses it too).

The box is upstream v3.4.1's ``roles/check-result/templates/welcome.j2`` as rendered: the console's address, the
account, the password line, the notes and the time it was rendered.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

log = logging.getLogger("installer")
RULE = "#" * 53
TITLE = "###              Welcome to KubeSphere!           ###"
STAMP = "https://kubesphere.io             "
"""The box's last text line: this, then the time it was rendered."""


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def render(address: str, password: str, rendered_at: str) -> str:
    return "\n".join([
        RULE,
        TITLE,
        RULE,
        "",
        f"Console: {address}",
        "Account: admin",
        password,
        "",
        "NOTES：",  # noqa: RUF001 - upstream text, byte for byte
        "  1. After you log into the console, please check the",
        "     monitoring status of service components in",
        '     "Cluster Management". If any service is not',
        "     ready, please wait patiently until all components",
        "     are up and running.",
        "  2. Please change the default password after login.",
        "",
        RULE,
        f"{STAMP}{rendered_at}",
        RULE,
        "",
    ])


def restamped(text: str, rendered_at: str) -> str:
    """``text`` (a box :func:`render` made) with its time line saying ``rendered_at``."""
    return "".join(f"{STAMP}{rendered_at}\n" if line.startswith(STAMP) else line
                   for line in text.splitlines(keepends=True))


def save(path: Path, text: str) -> None:
    """Replace ``path`` whole: a reader finds the old text or the new one, never an empty or missing file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def show(text: str) -> None:
    """The box in the log, a line per record (as upstream's ``logging.info`` of the file printed it)."""
    for line in text.splitlines():
        log.info("%s", line)


def is_box(text: str) -> bool:
    """Whether ``text`` is a welcome box (a file a user replaced, or a truncated one, is not shown again)."""
    lines = text.splitlines()
    return len(lines) > 3 and lines[1] == TITLE and any(line.startswith(STAMP) for line in lines)
