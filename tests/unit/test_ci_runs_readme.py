"""`.ci/run` runs README's test command, as README says: its last line is the command of README's test block."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Two commands", 1)[1]
    blocks = re.findall(r"```sh\n(.*?)\n```", section, re.S)
    assert blocks[:2] == ["hack/demo.sh up", "hack/test.sh"]  # the demo, then the tests
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[-1] == blocks[1]
