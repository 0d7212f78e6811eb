"""The run's inventory file (what each apply, delete and generator task recorded) and the module's
recorded inventory and facts (UIDs and guards) the engine hands a run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from installer.objects.foreign import guard
from installer.objects.refs import Obj, Ref

INVENTORY_ENV = "KS_INVENTORY_FILE"
RECORDED_ENV = "KS_RECORDED_INVENTORY"
"""A JSON file holding the module's recorded inventory (its last successful run's, with what failed runs since
applied), set by the engine when the record has one: what an uninstall deletes and a prune compares with."""
#: Kinds an apply lists by their metadata only (their specs are large); their guard covers which fields the
#: installer owns, not their values.
METADATA_LISTED = ("CustomResourceDefinition",)


def read_recorded() -> list[Ref] | None:
    """The recorded inventory the engine gave this run (``$KS_RECORDED_INVENTORY``), or None when the module's record
    has none (a first install, or a record of an installer that kept none)."""
    recorded = recorded_file()
    return None if recorded is None else [tuple(r) for r in recorded["refs"]]  # type: ignore[misc]


def read_recorded_facts() -> dict[str, list[str]]:
    """What the module's record holds of each object it owns (:attr:`ApplyResult.facts`), from the same file."""
    recorded = recorded_file()
    return dict(recorded.get("objects") or {}) if recorded is not None else {}


def recorded_file() -> dict[str, Any] | None:
    path = os.environ.get(RECORDED_ENV)
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return {"refs": data} if isinstance(data, list) else data


def object_key(ref: Iterable[str]) -> str:
    """The key of an object in the recorded facts (installer.engine.records.object_key)."""
    return "|".join(tuple(ref)[:4])


def facts_of(obj: Obj, metadata_only: bool = False) -> list[str]:
    """[UID, guard] of an object as the API server returned it (``metadata_only``: of its metadata alone, as
    the metadata-only list reads the kinds listed so)."""
    return [str(obj["metadata"].get("uid") or ""), guard({"metadata": obj["metadata"]} if metadata_only else obj)]


def record_generated(refs: list[Ref]) -> None:
    """Add objects a generator task made or kept (a random password, a certificate) to the run's inventory, so the
    recorded inventory names everything the module's run made."""
    append_entry({"applied": list(refs), "deleted": [], "spared": [], "foreign": [], "facts": {}})


def append_entry(entry: dict[str, Any]) -> None:
    """Append one line to ``$KS_INVENTORY_FILE`` (the engine's run inventory), when the run has one."""
    path = os.environ.get(INVENTORY_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def inventory_entries(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The lines of a run's inventory file (:meth:`ApplyResult.record`); a line a killed run left cut short is
    skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def read_inventory(path: str | os.PathLike[str]) -> list[Ref]:
    """The objects a run left applied, from the lines :meth:`ApplyResult.record` wrote (in order)."""
    live: dict[Ref, None] = {}
    for entry in inventory_entries(path):
        live.update(dict.fromkeys(tuple(r) for r in entry["applied"]))
        for r in entry["deleted"]:
            live.pop(tuple(r), None)  # type: ignore[arg-type]
    return sorted(live)


def read_facts(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """What a run's inventory file records of each object it left applied (the last write of each)."""
    facts: dict[str, list[str]] = {}
    for entry in inventory_entries(path):
        facts.update(entry.get("facts") or {})
        for r in entry["deleted"]:
            facts.pop(object_key(r), None)
    return facts


def read_notes(path: str | os.PathLike[str], key: str) -> list[str]:
    """One list of notes of a run's inventory file, each once: ``spared`` (what prunes and uninstalls left although
    it carries the module's label, and why) or ``foreign`` (the fields of other writers its applies removed, read
    here because a task with ``no_log`` hides its result)."""
    return list(dict.fromkeys(s for entry in inventory_entries(path) for s in entry.get(key) or []))
