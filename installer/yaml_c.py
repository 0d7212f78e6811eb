"""YAML parsed by LibYAML's safe loader: plain data, YAML 1.1 by PyYAML's safe constructor rules, several times
faster than the pure-Python loader (manifests, our own data files)."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    """One document."""
    return yaml.load(text, Loader=_LOADER)


def load_all(text: str) -> list[Any]:
    """Every document, as a list."""
    return list(yaml.load_all(text, Loader=_LOADER))
