"""The ClusterConfiguration spec's JSON Schema (package data ``schema.yaml``), shared by validation and secrets."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from installer.data_files import load_yaml


@cache
def schema() -> dict[str, Any]:
    """The spec JSON Schema (package data ``installer/config/schema.yaml``)."""
    return load_yaml(Path(__file__).with_name("schema.yaml"))
