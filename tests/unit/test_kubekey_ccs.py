"""The ccs KubeKey writes (tests/clients/kubekey: its templates for KubeSphere v3.0.0 to v3.4.1 as its Setup task
edits them) plan offline with ``python -m installer plan --desired``: none refused, every legacy key named in the
plan's migration notes, a ``null`` scalar named and defaulted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_zygote import ENGINE

from installer.config import default_spec, prepare
from installer.config.migrate import migrate
from installer.spec import get

REPO = Path(__file__).resolve().parents[2]
KUBEKEY = REPO / "tests" / "clients" / "kubekey"
CCS = sorted(KUBEKEY.glob("cc_v*.yaml"))
DEFAULT_MODULES = ["ks-config", "ks-core", "monitoring", "preinstall"]

#: Keys that the v3.4.1 default cc leaves out (or only shows in comments) and that are current, so a KubeKey cc holding
#: them needs no migration note; cloudCore's nodeSelector and tolerations are read by this installer's edgeruntime.
CURRENT = ("local_registry", "namespace_override", "zone", "common.es.master", "common.es.data",
           "edgeruntime.kubeedge.cloudCore.nodeSelector",
           "edgeruntime.kubeedge.cloudCore.tolerations")


def _paths(node: Any, prefix: str = "") -> list[str]:
    """Every dotted key path in ``node`` (not into lists, nor into nodeSelector's label keys)."""
    out = []
    if isinstance(node, dict) and not prefix.endswith("nodeSelector"):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            out += [path, *_paths(value, path)]
    return out


def _unknown_to_v341(spec: dict[str, Any]) -> list[str]:
    """The keys in ``spec`` that v3.4.1's default cc does not have, except the current ones (``CURRENT``)."""
    known = set(_paths(default_spec()))
    return [p for p in _paths(spec) if p not in known
            and not any(p == c or p.startswith(c + ".") for c in CURRENT)]


def _spec(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    assert doc["kind"] == "ClusterConfiguration" and doc["metadata"]["name"] == "ks-installer"
    return doc["spec"]


def _plan(path: Path) -> dict[str, Any]:
    proc = subprocess.run([*ENGINE, "plan", "--desired", str(path), "-o", "json"], capture_output=True, text=True,
                          cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_release_kubekey_writes_a_cc_for_is_here() -> None:
    versions = {yaml.safe_load(p.read_text())["metadata"]["labels"]["version"] for p in CCS}
    assert versions == {"v3.0.0", "v3.1.0", "v3.1.1", "v3.2.0", "v3.2.1", "v3.3.0", "v3.3.1", "v3.3.2", "v3.4.0",
                        "v3.4.1"}


@pytest.mark.parametrize("path", CCS, ids=[p.stem for p in CCS])
def test_kubekey_cc_plans_the_default_platform(path: Path) -> None:
    out = _plan(path)
    metrics_server = get(_spec(path), "metrics_server.enabled") is True  # only v3.0.0's template switches it on
    assert sorted(out["install"]) == sorted(DEFAULT_MODULES + ["metrics_server"] * metrics_server)
    assert out["upgrade"] == out["uninstall"] == out["blocked"] == []


@pytest.mark.parametrize("path", CCS, ids=[p.stem for p in CCS])
def test_every_legacy_key_is_named_in_the_migration_notes(path: Path) -> None:
    """Each key v3.4.1 does not know, as KubeKey wrote it, is named by a note: the key itself or the section it
    lies in (``moved console -> common.core.console``); after migration, each one left is named on its own."""
    raw = _spec(path)
    notes = _plan(path)["migrations"]
    words = {word.strip("(),:;") for note in notes for word in note.split()}

    def named(p: str) -> bool:
        parts = p.split(".")
        return any(".".join(parts[:i]) in words for i in range(1, len(parts) + 1))

    assert [p for p in _unknown_to_v341(raw) if not named(p)] == []
    migrated, _ = migrate(raw)
    assert [p for p in _unknown_to_v341(migrated) if p not in words] == []


def test_a_null_scalar_is_unset_named_and_defaulted() -> None:
    """KubeKey v2.1.0-alpha.0's v3.3.0 cc has ``logging.enabled:`` with no value."""
    path = KUBEKEY / "cc_v3.3.0-kk-v2.1.0-alpha.0.yaml"
    assert "logging" in _spec(path) and _spec(path)["logging"]["enabled"] is None
    out = _plan(path)
    assert "unset logging.enabled (null: as if absent; the default false applies)" in out["migrations"]
    assert "logging" in out["unchanged"]
    prepared = prepare(_spec(path))
    assert prepared.errors == [] and prepared.spec["logging"]["enabled"] is False


def test_a_null_scalar_keeps_the_previous_value_of_a_switch() -> None:
    """Unset, like a missing key: an installed module's switch keeps its value instead of uninstalling it."""
    previous = prepare({"logging": {"enabled": True}}).spec
    prepared = prepare({"logging": {"enabled": None}}, previous, keep=("logging.enabled",))
    assert prepared.errors == [] and prepared.spec["logging"]["enabled"] is True
    assert prepared.kept == {"logging.enabled": True}


@pytest.mark.parametrize("spec, errors, notes", [
    ({"logging": None}, ["logging: expected object; got null"], []),  # a whole section: not a scalar
    ({"etcd": {"port": None, "endpointIps": None}}, [],
     ['unset etcd.endpointIps (null: as if absent; the default "localhost" applies)',
      "unset etcd.port (null: as if absent; the default 2379 applies)"]),
    ({"authentication": {"jwtSecret": None}}, [], ["unset authentication.jwtSecret (null: as if absent)"]),
    ({"servicemesh": {"istio": {"components": {"ingressGateways": [{"name": "gw", "enabled": None}]}}}}, [],
     ["unset servicemesh.istio.components.ingressGateways[0].enabled (null: as if absent)"]),
    ({"common": {"gpu": {"kinds": [{"resourceName": None, "resourceType": "GPU"}]}}},  # absent, so missing
     ["common.gpu.kinds[0].resourceName: missing required field"],
     ["unset common.gpu.kinds[0].resourceName (null: as if absent)"]),
])
def test_null_means_unset_only_where_a_scalar_belongs(spec: dict[str, Any], errors: list[str],
                                                      notes: list[str]) -> None:
    prepared = prepare(spec)
    assert [str(e) for e in prepared.errors] == errors
    assert [m for m in prepared.migrations if "null" in m] == notes
