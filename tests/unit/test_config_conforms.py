"""installer.config.conforms judges a spec as jsonschema does with installer.config.validate's rules, so that
validate asks jsonschema only for the messages of a spec with errors."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from installer.config import apply_defaults, default_spec, validate
from installer.config.conforms import conforms
from installer.config.spec_schema import schema
from installer.config.validate import _validator

SAMPLES: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 7, 30880, 30880.0, 2.5, float("nan"), float("inf"), 70000, "", "x", "80", "080",
    "2Gi", "5 Gi", "512Mi\n", "host", "Host", "10m0s", "a.b", "-a", "x" * 300, [], [{}], ["x"], [1], {}, {"a": "b"},
    {"a": 1}, {"bad key!": "x"}, {"resourceName": "nvidia.com/gpu", "resourceType": "GPU"},
)
"""Values put in place of each value of the spec: of every JSON type, on both sides of the schema's bounds,
patterns and choices."""


def nodes(node: Any, parts: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value under ``node`` (objects and lists too), ``node`` itself first."""
    yield parts
    if isinstance(node, dict):
        for key, value in node.items():
            yield from nodes(value, (*parts, key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from nodes(item, (*parts, i))


def replaced(spec: dict[str, Any], parts: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(spec)
    if not parts:
        return copy.deepcopy(value)
    node = out
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = copy.deepcopy(value)
    return out


def judged_alike(spec: Any) -> bool:
    return conforms(spec, schema()) is _validator().is_valid(spec)


def sections_filled() -> dict[str, Any]:
    """The defaulted spec with the sections that are empty by default given an entry, so that the schemas of
    their items and keys are reached too."""
    return apply_defaults({
        "nodeSelector": {"kubernetes.io/os": "linux"}, "tolerations": [{"operator": "Exists"}],
        "common": {"gpu": {"kinds": [{"resourceName": "nvidia.com/gpu", "resourceType": "GPU", "default": True}]}},
        "multicluster": {"clusterRole": "host"},
    })


@pytest.mark.parametrize("base", [default_spec(), sections_filled()], ids=["default", "sections filled"])
def test_every_value_in_place_of_every_value_is_judged_as_jsonschema_judges_it(base: dict[str, Any]) -> None:
    assert conforms(base, schema()) and validate(base) == []
    specs = [(parts, sample, replaced(base, parts, sample)) for parts in nodes(base) for sample in SAMPLES]
    verdicts = [(parts, sample, conforms(spec, schema()), _validator().is_valid(spec)) for parts, sample, spec in specs]
    assert [v for v in verdicts if v[2] is not v[3]] == []
    valid = sum(v[2] for v in verdicts)
    assert valid > 300 and len(verdicts) - valid > 3000  # both verdicts, many times each


def test_unknown_fields_are_judged_as_jsonschema_judges_them() -> None:
    base = sections_filled()
    objects = [parts for parts in nodes(base) if isinstance(at(base, parts), dict)]
    wrong = [parts for parts in objects if not judged_alike(replaced(base, parts, {**at(base, parts), "unknownX": 1}))]
    assert len(objects) > 50 and wrong == []


def at(spec: Any, parts: tuple[Any, ...]) -> Any:
    for part in parts:
        spec = spec[part]
    return spec


def test_a_keyword_it_does_not_know_is_a_no() -> None:
    assert conforms("x", {"type": "string"})
    assert not conforms("x", {"type": "string", "format": "email"})
    assert not conforms("x", {"$ref": "#/$defs/missing"})
    assert not conforms(1, {"enum": [1.0]})  # equal to jsonschema, but of another type: jsonschema decides
