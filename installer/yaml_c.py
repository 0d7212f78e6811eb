"""YAML parsed and written by LibYAML's safe loader and dumper: plain data, YAML 1.1 by PyYAML's safe rules, several
times faster than the pure-Python ones (manifests, our own data files)."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    """One document."""
    return yaml.load(text, Loader=_LOADER)


def load_all(text: str) -> list[Any]:
    """Every document, as a list."""
    return list(yaml.load_all(text, Loader=_LOADER))


def dump_all(documents: list[Any]) -> str:
    """Documents as one YAML stream (keys sorted, as ``yaml.safe_dump_all``)."""
    return yaml.dump_all(documents, Dumper=_DUMPER)
