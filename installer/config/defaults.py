"""The v3.4.1 default spec (the packaged ``cluster-configuration.yaml``) and merging it under a user spec."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

from installer.data_files import load_yaml

DEFAULT_CR = "cluster-configuration.yaml"


@cache
def _default_cr() -> dict[str, Any]:
    return load_yaml(Path(__file__).parents[1] / "data" / DEFAULT_CR)


def default_cr() -> dict[str, Any]:
    """The whole default ClusterConfiguration object (a fresh copy)."""
    return copy.deepcopy(_default_cr())


def default_spec() -> dict[str, Any]:
    """The default ``spec`` (a fresh copy). Keys the file only mentions in comments are absent."""
    return copy.deepcopy(_default_cr()["spec"])


def apply_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    """A new dict: ``spec`` over the defaults. User values win, dicts deep-merge, lists are replaced."""
    return _merge(default_spec(), spec)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
