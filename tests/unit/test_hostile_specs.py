"""Generated hostile specs (hack/hostile_specs.py) through the offline ``plan`` path, in-process: each plans or is
refused with a message naming the field or the YAML problem; no traceback, no secret, no flood of output."""

from __future__ import annotations

import collections
import copy
import itertools
import random
import time
from pathlib import Path

import pytest
from hostile_specs import (
    DICT_MUTATIONS,
    KINDS,
    TEXT_MUTATIONS,
    WRONG_VALUES,
    _base,
    generate,
    run,
    run_found,
    run_plan,
    run_state,
)

SPEC = "apiVersion: installer.kubesphere.io/v1alpha1\nkind: ClusterConfiguration\nmetadata: {name: ks-installer}\n"


def test_a_hundred_generated_specs_plan_or_are_refused(tmp_path: Path) -> None:
    # 30 000 keys take seconds for PyYAML to parse: their refusal is checked below, once.
    totals = run(100, 7, tmp_path, quiet=True, allowed=[k for k in KINDS if k not in ("many_keys", "bombs")])
    assert not totals.get("BUG"), totals
    assert totals.get("refused", 0) > 50


@pytest.mark.parametrize("content, message", [
    (SPEC.encode() + b"spec:\n  local_registry: \"a\xffb\"\n", "line 5: not UTF-8 (byte 0xff)"),
    (SPEC + "spec:\n" + "".join(f"  k{i}: {i}\n" for i in range(20_001)),
     "line 5, column 3: a mapping holds more than 20000 keys (spec)"),
], ids=["invalid-utf8", "many-keys"])
def test_unreadable_yaml_names_the_line_and_the_problem(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = tmp_path / "cc.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    outcome = run_plan(path)
    assert outcome.verdict == "refused"
    assert outcome.output == f"error: {path}: cannot read YAML: {message}\n"


def test_a_shown_value_has_no_terminal_controls(tmp_path: Path) -> None:
    path = tmp_path / "cc.yaml"
    path.write_text(SPEC + 'spec:\n  common: {core: {console: {type: "\\u202e\\x9b31mNodePort"}}}\n')
    outcome = run_plan(path)
    assert outcome.verdict == "refused"
    assert 'common.core.console.type: must be one of' in outcome.output
    assert 'got "\\u202e\\u009b31mNodePort"' in outcome.output


def test_bombs_and_oversized_files_are_refused_quickly(tmp_path: Path) -> None:
    started = time.monotonic()
    totals = run(12, 5, tmp_path, quiet=True, allowed=["bombs"])
    assert totals == {"refused": 12}
    assert time.monotonic() - started < 60  # each within seconds (a merge bomb took 21 s and 1.6 GB before)


def test_hostile_state_secrets_read_or_are_refused_with_a_short_message() -> None:
    totals = run_state(150, 11, quiet=True)
    assert not totals.get("BUG"), totals
    assert totals.get("refused", 0) > 100


def test_hostile_credentials_found_are_kept_replaced_or_refused_naming_the_secret() -> None:
    totals = run_found(300, 3, quiet=True)
    assert not totals.get("BUG"), totals
    assert totals.get("refused", 0) > 100 and totals.get("replaced", 0) > 20 and totals.get("kept", 0) > 20


@pytest.mark.parametrize("seed", [1, 3, 5, 8])
def test_the_generator_makes_a_spec_for_every_draw(seed: int) -> None:
    rng = random.Random(seed)
    made = collections.Counter(kind for _ in range(500) for kind in generate(rng)[0])
    assert set(made) == set(KINDS)


@pytest.mark.parametrize("section", [("common",), ("authentication",), ("common", "es"), ("common", "core"),
                                     ("affinity",), ("tolerations",)], ids=".".join)
def test_each_mutation_applies_over_any_value_an_earlier_one_left(section: tuple[str, ...]) -> None:
    """A mutation after one that made a section a scalar or a list (``--seed 5`` drew that: a TypeError)."""
    for i, (value, kind) in enumerate(itertools.product(WRONG_VALUES, KINDS)):
        doc = _base()
        node = doc["spec"]
        for key in section[:-1]:
            node = node[key]
        node[section[-1]] = copy.deepcopy(value)
        mutation = DICT_MUTATIONS.get(kind) or TEXT_MUTATIONS[kind]
        mutation(random.Random(i), doc)
