"""Every module's declared inputs are exactly what its playbook reads, and its declared images exactly the
catalogue images its objects name.

For each module the real install playbook runs offline, once per spec variant (each variant is its own Ansible
host, so facts never leak between variants), with the installer's Ansible modules replaced by recorders
(``installer.preview.render``): what a
run would send to the cluster (objects, secrets, lookups) is its output. Changing one declared input must change
that output; changing every spec path the module does not declare must not. This is what "only what changed
runs" rests on, and it covers every module in the registry, including those added later. The same runs show
which catalogue images each variant's objects name: ``python -m installer images`` lists them from the
registry, so the registry must say exactly that.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from installer_state import DEFAULT_CC

from installer.config import apply_defaults
from installer.config.validate import schema
from installer.engine.plays import play_variables, plays_of
from installer.modules import MODULES, Module
from installer.objects.images import catalogue, spec_refs
from installer.preview.render import WORLD, Host, run_hosts
from installer.spec import get, leaves, merge, nested

REPO = Path(__file__).resolve().parents[2]

#: Values for paths the default spec leaves unset (by path, else by the last component).
SAMPLES: dict[str, Any] = {
    "nodeSelector": {"ks-test": "yes"},
    "tolerations": [{"key": "ks-test", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "ks-test", "operator": "Exists"}]}}]}},
    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "ks-test", "operator": "Exists"}]}}]},
    "resources": {"limits": {"cpu": "3", "memory": "3Gi"}, "requests": {"cpu": "30m", "memory": "30Mi"}},
    "local_registry": "registry.example.com:5000",
    "namespace_override": "mirror",
    "zone": "cn",
    "common.core.apiserver": {"resources": {"limits": {"cpu": "3"}}},
    "common.core.controllerManager": {"resources": {"limits": {"cpu": "3"}}},
    "common.core.console.extraVolumes": [{"name": "ks-test", "emptyDir": {}}],
    "common.core.console.extraVolumeMounts": [{"name": "ks-test", "mountPath": "/ks-test"}],
    "authentication.adminPassword": "too-weak",  # preinstall checks it: a weak one shows the check reads it
    "common.monitoring.type": "external",
    "common.s3": {"endpoint": "https://s3.example.com", "accessKeyID": "ak", "secretAccessKey": "sk"},
    "common.notification": {"endpoint": "http://notification.example.com:19093"},
    "gateway": {"namespace": "gateways"},
    "common.containersLogMountedPath": "/data/containers",
    "common.fluentbit": {"nodeSelector": {"ks-test": "yes"}},
    "oauthOptions": {"accessTokenMaxAge": "2h", "identityProviders": []},
}
ALL_ON = {f"{m}.enabled": True for m in ("logging", "events", "auditing", "servicemesh", "devops", "alerting",
                                         "edgeruntime", "edgeruntime.kubeedge", "gatekeeper", "metrics_server",
                                         "common.redis", "common.openldap", "openpitrix.store")}
ALL_ON |= {"multicluster.clusterRole": "host", "network.topology.type": "weave-scope", "telemetry_enabled": True}
FACTS = {"kubernetes_version": "v1.34.4", "nodeNum": 1, "ks_version": "v3.4.1", "ks_installer_version": "test",
         "ks_namespace": "kubesphere-system", "ks_hash": "h", "ks_node_runtime_version": "containerd://1.7.2"}
__all__ = ["FACTS", "WORLD", "all_on", "only_this_on", "run_variants", "variants"]


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    defs = schema().get("$defs", {})
    while "$ref" in node or "anyOf" in node:
        node = defs[node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node["anyOf"][0]
    return node


def _schema_node(path: str) -> dict[str, Any]:
    node: dict[str, Any] = schema()
    for part in path.split("."):
        props = node.get("properties") or {}
        if part not in props:
            return {}
        node = _resolve(props[part])
    return node


def _sample(path: str) -> Any:
    if path in SAMPLES:
        return copy.deepcopy(SAMPLES[path])
    last = path.rsplit(".", 1)[-1]
    if last in SAMPLES:
        return copy.deepcopy(SAMPLES[last])
    node = _schema_node(path)
    if node.get("enum"):
        return node["enum"][0]
    kind = node.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" and node.get("properties"):
        return {k: _sample(f"{path}.{k}") for k in node["properties"]}
    if kind == "array" and node.get("items", {}).get("type") == "string":
        return ["x-changed"]
    samples = {"boolean": True, "integer": 7, "number": 7, "string": "x-changed", "object": {"ks-test": "x"},
               None: "x-changed"}
    if kind in samples:
        return samples[kind]
    raise AssertionError(f"no sample value for spec path {path!r}: add one to SAMPLES")


def mutate(value: Any, path: str) -> Any:
    """A different, well-formed value for ``path``."""
    if value is None or value in ({}, []):
        return _sample(path)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        enum = _schema_node(path).get("enum") or []
        other = [e for e in enum if e != value]
        return other[0] if other else value + "-changed"
    if isinstance(value, dict):
        absent = [k for k in _schema_node(path).get("properties") or {} if k not in value]
        return {**{k: mutate(v, f"{path}.{k}") for k, v in value.items()},
                **{k: _sample(f"{path}.{k}") for k in absent}}
    return [mutate(v, path) for v in value]


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


@cache
def all_on() -> dict[str, Any]:
    """The default spec with every module switched on, so that every conditional read happens."""
    spec = apply_defaults(copy.deepcopy(DEFAULT_CC["spec"]))
    for path, value in ALL_ON.items():
        merge(spec, nested(path, value))
    assert all(m.enabled(spec) for m in MODULES), [m.name for m in MODULES if not m.enabled(spec)]
    return spec


def only_this_on(module: Module) -> dict[str, Any]:
    """The default spec with just this module switched on (reads hidden by another module's switch show)."""
    spec = apply_defaults(copy.deepcopy(DEFAULT_CC["spec"]))
    for path in module.enabled.paths:
        if path in ALL_ON and not module.enabled(spec):
            merge(spec, nested(path, ALL_ON[path]))
    return spec


def variants(module: Module, base: dict[str, Any], inputs: tuple[str, ...],
             undeclared: bool = True) -> dict[str, dict[str, Any]]:
    """``base``, one variant per input, and ``undeclared`` (every path the module does not declare changed)."""
    out = {"base": base}
    for path in inputs:
        out[f"input {path}"] = _set(base, path, mutate(get(base, path), path))
    if not undeclared:
        return out
    undeclared = copy.deepcopy(base)
    paths = {path for path, _ in leaves(base)} | {p for p in SAMPLES if "." in p or p in base or p in module.all_inputs}
    for path in sorted(paths):
        if any(_related(path, d) for d in module.all_inputs) or not _settable(undeclared, path):
            continue
        undeclared = _set(undeclared, path, mutate(get(undeclared, path), path))
    out["undeclared"] = undeclared
    return out


def _settable(spec: dict[str, Any], path: str) -> bool:
    parent = path.rpartition(".")[0]
    return not parent or isinstance(get(spec, parent), dict) or get(spec, parent) is None


def _set(spec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    *parents, leaf = path.split(".")
    node = out
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value
    return out


def run_variants(module: Module, specs: dict[str, dict[str, Any]], out: Path) -> dict[str, Any]:
    """Each variant's recorded module calls (or the task that failed); ``out`` is a new directory."""
    out.mkdir(parents=True)
    hosts = {f"v{i}": Host(plays_of(module), {**spec, **FACTS, **play_variables(module), "ks_action": "install"})
             for i, spec in enumerate(specs.values())}
    results = run_hosts(hosts, out, REPO / "roles", world=WORLD)
    return {name: results[host] for name, host in zip(specs, hosts, strict=True)}


@pytest.fixture(scope="module")
def runs() -> Iterator[Path]:
    """The directory of this file's playbook runs (recorders, inventories, captures), removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="ks-declared-inputs-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@cache
def all_on_runs(module: Module, root: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The module's playbook over the all-on spec and one variant per input: the variants and what each
    recorded."""
    specs = variants(module, copy.deepcopy(all_on()), module.all_inputs)
    return specs, run_variants(module, specs, root / module.name)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_declared_inputs_are_exactly_what_the_module_reads(module: Module, runs: Path) -> None:
    results = dict(all_on_runs(module, runs)[1])
    base = results.pop("base")
    assert base, f"{module.name}: the playbook recorded nothing (did another ks_* action shadow the recorders?)"
    assert not any(c["module"] == "ks_failed" for c in base), base
    undeclared = results.pop("undeclared")
    assert undeclared == base, f"{module.name} reads spec paths it does not declare: {_diff(base, undeclared)}"
    unread = tuple(name.removeprefix("input ") for name, calls in results.items() if calls == base)
    if unread:  # a read may hide behind another module's switch (ldap when devops is on): try with this one alone
        again = run_variants(module, variants(module, only_this_on(module), unread, undeclared=False),
                             runs / f"{module.name}-alone")
        base = again.pop("base")
        unread = tuple(name.removeprefix("input ") for name, calls in again.items() if calls == base)
    assert not unread, f"{module.name} declares inputs it never reads: {list(unread)}"


def images_named(spec: dict[str, Any], calls: list[Any]) -> set[str]:
    """Catalogue keys whose reference under ``spec`` (or its repository, for a config that gives the tag
    apart; only a repository with a path, as a bare word like ``nginx`` also names ports and containers) the
    recorded calls name."""
    text = json.dumps(calls)
    refs = spec_refs(spec, catalogue(REPO / "roles"))
    return {key for key, ref in refs.items()
            if ref in text or ("/" in (repo := ref.rpartition(":")[0])
                               and re.search(rf"(?<![\w./-]){re.escape(repo)}(?![\w./:-])", text))}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_declared_images_are_exactly_the_images_the_module_deploys(module: Module, runs: Path) -> None:
    specs, results = all_on_runs(module, runs)
    for name, calls in results.items():
        if any(c["module"] == "ks_failed" for c in calls):
            continue  # a check refused the variant before anything was deployed
        declared = set(module.image_keys(specs[name]))
        assert images_named(specs[name], calls) == declared, f"{module.name}, variant {name!r}"


def _diff(base: list[Any], other: list[Any]) -> str:
    for a, b in zip(base, other, strict=False):
        if a != b:
            return f"\n- {json.dumps(a, sort_keys=True)[:1500]}\n+ {json.dumps(b, sort_keys=True)[:1500]}"
    return f"{len(base)} calls vs {len(other)}"
