"""The ClusterConfiguration spec's JSON Schema (package data ``schema.yaml``), shared by validation and secrets."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml


@cache
def schema() -> dict[str, Any]:
    """The spec JSON Schema (package data ``installer/config/schema.yaml``)."""
    text = resources.files("installer.config").joinpath("schema.yaml").read_text(encoding="utf-8")
    return yaml.load(text, Loader=yaml.CSafeLoader)  # our own file: the C parser is several times faster
