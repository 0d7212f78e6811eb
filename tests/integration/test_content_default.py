"""Content parity with ks-installer v3.4.1 for the default cc, on the default platform (no install of its own).

What the platform modules' objects say (kubesphere.yaml and every other ConfigMap, Secrets' key names, RBAC roles,
PrometheusRules, webhook configurations) against v3.4.1's for the default spec (``tests/parity/content-default``),
except the differences the ``content-default:`` section of ``tests/parity/expectations.yaml`` documents.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.dynamic import DynamicClient
from parity_content import cluster_facts, compare

from .conftest import Installer

pytestmark = [pytest.mark.cluster, pytest.mark.platform]
PARITY = Path(__file__).resolve().parents[1] / "parity"
CONTENT: dict[str, dict[str, Any]] = {p.stem: json.loads(p.read_text())
                                      for p in sorted((PARITY / "content-default").glob("*.json"))}
EXPECTATIONS: dict[str, Any] = yaml.safe_load((PARITY / "expectations.yaml").read_text())


def test_default_content_says_what_upstreams_said(installer: Installer) -> None:
    """Each object of tests/parity/content-default/<module>.json, read from the default platform, says what
    upstream's did for the default cc, except the documented differences (per object, per path); upstream objects
    the modules do not apply (``gaps:``) are not compared."""
    gaps = {r for entries in EXPECTATIONS["gaps"].values() for r in entries}
    live = cluster_facts(DynamicClient(installer.api))
    problems: list[str] = []
    for module, data in CONTENT.items():
        objects = {r: paths for r, paths in data["objects"].items() if r not in gaps}
        result = compare(objects, live, EXPECTATIONS["content-default"])
        print(f"content-default {module}: {result.summary(len(objects))}")
        problems += result.problems
    assert not problems, "content differs from upstream's for the default cc:\n  " + "\n  ".join(problems)
