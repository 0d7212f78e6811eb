"""Write installer/data/upstream-objects.json: the (kind, namespace, name) of every object ks-installer v3.4.1 and
v3.3.2 created (tests/parity: the v3.4.1 inventory and what the committed renders of both tags applied), which the
takeover reads to tell the original installer's leftovers from other owners' objects.
tests/unit/test_upstream_objects.py holds the file equal to what this writes.

    python hack/upstream_objects.py
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PARITY = REPO / "tests" / "parity"
OUT = REPO / "installer" / "data" / "upstream-objects.json"


def names() -> list[list[str]]:
    """Sorted [kind, namespace, name] of the objects the original installer's tags create by a fixed name."""
    found: set[tuple[str, str, str]] = set()
    for path in sorted((PARITY / "upstream").glob("*.json")):
        for obj in json.loads(path.read_text())["objects"]:
            if not obj.get("name_is_random"):
                found.add((obj["kind"], obj["namespace"] or "", obj["name"]))
    for path in sorted(PARITY.glob("upstream-v3*/*/manifest.json")):
        for steps in json.loads(path.read_text())["modules"].values():
            for ident in (ident for step in steps for ident in step["objects"]):
                kind, *rest = ident.split("/")
                found.add((kind, rest[0] if len(rest) == 2 else "", rest[-1]))
    return [list(key) for key in sorted(found)]


def render() -> str:
    rows = ",\n".join(json.dumps(row) for row in names())
    return f'{{"source": "ks-installer v3.4.1 and v3.3.2 (tests/parity)", "objects": [\n{rows}\n]}}\n'


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"{OUT.relative_to(REPO)}: {len(names())} objects")
