"""Every module's declared inputs are exactly what its playbook reads, and its declared images exactly the
catalogue images its objects name.

For each module the real install playbook runs offline, once per spec variant (each variant is its own Ansible
host, so facts never leak between variants), with the installer's Ansible modules replaced by recorders: what a
run would send to the cluster (objects, secrets, lookups) is its output. Changing one declared input must change
that output; changing every spec path the module does not declare must not. This is what "only what changed
runs" rests on, and it covers every module in the registry, including those added later. The same runs show
which catalogue images each variant's objects name: ``python -m installer images`` lists them from the
registry, so the registry must say exactly that.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from installer_state import DEFAULT_CC

from installer.config import apply_defaults
from installer.config.validate import schema
from installer.images import catalogue, spec_refs
from installer.modules import MODULES, Module
from installer.spec import get, leaves, merge, nested

REPO = Path(__file__).resolve().parents[2]
RECORDED = ("ks_manifest", "ks_info", "ks_core_secret", "ks_rollout", "ks_webhook_cert", "ks_metadata",
            "ks_random_secret", "ks_telemetry", "ks_alert_rules", "ks_failed")

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
#: What the recording ks_info answers, by kind.
WORLD: dict[str, list[dict[str, Any]]] = {
    "Secret": [{"metadata": {"name": "kubesphere-secret", "namespace": "kubesphere-system"},
                "data": {"secret": "and0LWtleQ==", "token": "YWRtaW4udG9rZW4="}},
               {"metadata": {"name": "kube-etcd-client-certs", "namespace": "kubesphere-monitoring-system"},
                "data": {"etcd-client-ca.crt": "Y2E=", "etcd-client.crt": "Y3J0", "etcd-client.key": "a2V5"}}],
    "Node": [{"metadata": {"name": "node1", "labels": {"node-role.kubernetes.io/control-plane": ""}}}],
    "StorageClass": [{"metadata": {"name": "standard",
                                   "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}],
    "Namespace": [{"metadata": {"name": n}} for n in ("default", "kube-system", "kube-public", "kubesphere-system")],
    "Endpoints": [{"metadata": {"name": "ks-controller-manager", "namespace": "kubesphere-system"},
                   "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 8443}]}]},
                  {"metadata": {"name": "logsidecar-injector-admission", "namespace": "kubesphere-logging-system"},
                   "subsets": [{"addresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 8443}]}]},
                  {"metadata": {"name": "kubefed-admission-webhook", "namespace": "kube-federation-system"},
                   "subsets": [{"addresses": [{"ip": "10.0.0.3"}], "ports": [{"port": 8443}]}]}],
    "CustomResourceDefinition": [{"metadata": {"name": "globalrulegroups.alerting.kubesphere.io"},
                                  "status": {"conditions": [{"type": "Established", "status": "True"}]}}],
}

#: The action plugin each recorded name runs instead of the installer's module: in Ansible's own process, it
#: appends the call (name and arguments) to ``$KS_CAPTURE_DIR/<host>.jsonl`` and answers as the cluster of WORLD.
RECORDER = '''"""Records its arguments instead of touching a cluster."""
import json
import os

from ansible.plugins.action import ActionBase

NAME = %r
WORLD = json.loads(%r)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        params = dict(self._task.args)
        capture = os.path.join(os.environ["KS_CAPTURE_DIR"], task_vars["inventory_hostname"] + ".jsonl")
        with open(capture, "a") as out:
            out.write(json.dumps({"module": NAME, "args": params}, sort_keys=True, default=str) + "\\n")
        result["changed"] = False
        if NAME == "ks_info":
            name, namespace = params.get("name"), params.get("namespace")
            result["resources"] = [o for o in WORLD.get(params.get("kind"), [])
                                   if (not name or o["metadata"]["name"] == name)
                                   and (not namespace or o["metadata"].get("namespace") == namespace)]
        elif NAME == "ks_webhook_cert":
            result.update(reason="kept", ca_bundle="Q0E=")
        elif NAME in ("ks_rollout",):
            result.update(rolled=[], missing=[])
        return result
'''


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


@cache
def _action_plugins(root: Path) -> Path:
    """The recorders, written once under ``root``."""
    plugins = root / "action_plugins"
    plugins.mkdir(parents=True)
    for name in RECORDED:
        (plugins / f"{name}.py").write_text(RECORDER % (name, json.dumps(WORLD)))
    return plugins


def run_variants(module: Module, specs: dict[str, dict[str, Any]], out: Path) -> dict[str, Any]:
    """Each variant's recorded module calls (or the task that failed); ``out`` is a new directory whose parent
    holds the recorders."""
    out.mkdir(parents=True)
    hosts = {f"v{i}": {**spec, **FACTS, "ks_module": module.name, "ks_action": "install",
                       "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
             for i, spec in enumerate(specs.values())}
    (out / "inventory.json").write_text(json.dumps({"all": {"hosts": hosts}}))
    play = yaml.safe_load((REPO / "playbooks" / module.playbook).read_text())[0]
    roles = [r if isinstance(r, str) else r["role"] for r in play.get("roles", [])]
    record_failure = {"ks_failed": {"task": "{{ ansible_failed_task.name }}",
                                    "msg": "{{ ansible_failed_result.msg | default('') }}"}}
    playbook = [{"hosts": "all", "gather_facts": False,
                 "tasks": [{"block": [{"ansible.builtin.import_role": {"name": r}} for r in roles]
                            + play.get("tasks", []), "rescue": [record_failure]}]}]
    (out / "playbook.yaml").write_text(yaml.safe_dump(playbook))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(REPO / "roles"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOME": str(out / ".ansible"), "ANSIBLE_LOCAL_TEMP": str(out / "tmp"), "ANSIBLE_FORKS": "6",
           "ANSIBLE_ACTION_PLUGINS": str(_action_plugins(out.parent)), "KS_CAPTURE_DIR": str(out)}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(out / "inventory.json"),
                           str(out / "playbook.yaml")], env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    results = {}
    for (name, _), host in zip(specs.items(), hosts, strict=True):
        capture = out / f"{host}.jsonl"
        assert capture.exists() or proc.returncode == 0, proc.stdout[-3000:]
        results[name] = [json.loads(line) for line in capture.read_text().splitlines()] if capture.exists() else []
    return results


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
