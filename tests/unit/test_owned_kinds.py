"""Every object a module can apply is one its uninstall removes and its prune looks at.

Prune and uninstall (installer.manifests) only look at the module's labelled objects of the kinds they are given:
the kinds of the objects of the ks_manifest call plus its ``kinds`` (the roles' ``ks_<role>_kinds`` lists). A kind
a role renders that its list forgets is never pruned (when a variant stops rendering it) and never uninstalled: it
is left behind when the module is switched off. So, for every module in the registry, its real install and
uninstall playbooks run offline (the recorders of test_declared_inputs, answering from CLUSTER; one Ansible host per
run) over spec variants: the default spec with the module on, every module on, and every module on with each
declared input changed (spec_variants). Then:

* uninstall: every object an install variant applies (with ks_manifest, or the Secrets and the admin User that
  the installer's modules generate) is of a kind each uninstall run removes, or in a namespace of the module that
  it removes, unless KEPT names it;
* namespaces: the module's objects in a namespace that another module creates include one of a kind that keeps
  that module's uninstall from deleting the namespace under them (installer.manifests.TENANT_KINDS, and the
  ``tenants`` of the call);
* prune: a ks_manifest task that prunes looks, in every variant it runs in, at every kind it applies in any
  variant; no variant leaves an object another variant applied without a task that applies, prunes or removes it;
  and no task prunes what another task of the same run applies or generates.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_declared_inputs import FACTS, RECORDED, RECORDER, WORLD, all_on, only_this_on, variants

from installer.ansible_tasks.ks_webhook_cert import ARGUMENT_SPEC as WEBHOOK_CERT_ARGS
from installer.core_secret import ADMIN, SECRET_NAME, USER_API
from installer.manifests import KEPT_ON_UNINSTALL, PURGED_KINDS, TENANT_KINDS, load_definitions
from installer.modules import GLOBAL_INPUTS, MODULES, Module, always, dependencies
from installer.plays import plays_of
from installer.spec import get, under

REPO = Path(__file__).resolve().parents[2]

Ref = tuple[str, str, str]
"""(``apiVersion/Kind``, namespace or "", name)."""

#: Objects a module applies that its uninstall leaves on purpose, by (module, kind, name): why. Those of a kind of
#: installer.manifests.PURGED_KINDS go with a purge; the others stay for good.
KEPT: dict[tuple[str, str, str], str] = {
    # Generated passwords, kept with the volumes whose data they guard: re-enabling finds both again.
    ("redis", "v1/Secret", "redis-secret"): "the password of the data in the kept redis volumes",
    ("openldap", "v1/Secret", "openldap-secret"): "the password the kept LDAP volume was initialised with",
    ("minio", "v1/Secret", "minio"): "the credentials of the data in the kept minio volume",
    ("devops", "v1/Secret", "devops-jenkins"): "Jenkins' admin password, kept with the Jenkins volume",
    # An uninstall removes a module's objects by kind: this one cannot go without devops-jenkins.
    ("devops", "v1/Secret", "s2i-webhook-server-cert"): "a Secret beside devops-jenkins (ks_webhook_cert reuses it)",
    # Every system namespace belongs to system-workspace: deleting it would delete kube-system and the others.
    ("ks-core", "tenant.kubesphere.io/v1alpha1/Workspace", "system-workspace"): "owns the system namespaces",
    ("ks-core", "tenant.kubesphere.io/v1alpha2/WorkspaceTemplate", "system-workspace"): "owns the system namespaces",
}

#: Kinds an uninstall keeps unless it purges, and a purge looks at anyway: a purge is the only way for each of them.
KEPT_UNLESS_PURGED = {k for k in PURGED_KINDS if k.rpartition("/")[2] in KEPT_ON_UNINSTALL}

#: Spec values for the variant of an input, where the changed value of test_declared_inputs.mutate is one the
#: playbook refuses, or one that does not change what it renders.
CHANGED: dict[str, Any] = {
    "persistence.storageClass": "fast",  # a StorageClass of CLUSTER
    "authentication.adminPassword": "Changed-Passw0rd",
    "etcd.endpointIps": "10.0.0.5",
    "common.es.externalElasticsearchPort": "9200",
    "devops.argocd.installation": "custom",  # the user's Argo CD: none of the module's
}


def _crd(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Established", "status": "True"}]}}


def _secret(namespace: str, name: str, key: str = "k") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "type": "Opaque", "data": {key: "dg=="}}


#: What the recording ks_info answers: test_declared_inputs' WORLD, plus what makes the playbooks render more: the
#: CRDs of a prometheus-operator (alerting and the monitors of devops and monitoring need them), the StorageClass of
#: CHANGED, and Secrets that a role reads back and applies again: notification-manager's certificate and Jenkins'
#: password (generated by ks_webhook_cert and ks_random_secret just before), and the external S3's keys of ks-core
#: (emptied when the cc goes back to MinIO).
CLUSTER: dict[str, list[dict[str, Any]]] = {
    **WORLD,
    "StorageClass": [*WORLD["StorageClass"], {"metadata": {"name": CHANGED["persistence.storageClass"]}}],
    "Secret": [*WORLD["Secret"], _secret("kubesphere-monitoring-system", "notification-manager-webhook-server-cert"),
               _secret("kubesphere-devops-system", "devops-jenkins", "jenkins-admin-password"),
               _secret("kubesphere-system", "kubesphere-s3")],
    "CustomResourceDefinition": [*WORLD["CustomResourceDefinition"], *(
        _crd(f"{plural}.monitoring.coreos.com")
        for plural in ("servicemonitors", "podmonitors", "prometheusrules", "thanosrulers"))],
}
#: Namespaces that exist before any module runs (the installer's own among them): never a module's.
PREEXISTING = {n["metadata"]["name"] for n in WORLD["Namespace"]}

#: Appended to the ks_manifest recorder: it records also which task called it (file:line, and its name).
TASK_RECORDER = '''

_Recorder = ActionModule


class ActionModule(_Recorder):
    def run(self, tmp=None, task_vars=None):
        self._task.args = {**self._task.args, "ks_test_task": self._task.get_path(),
                           "ks_test_name": self._task.get_name()}
        return super().run(tmp, task_vars)
'''


def _bool(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "yes", "1", "on")


@dataclass(frozen=True)
class Call:
    """One ks_manifest call, or the objects one of the installer's other modules generates."""

    task: str
    """Where the task is written (``file:line``): the same task in every variant."""
    name: str
    present: bool
    prune: bool
    objects: tuple[Ref, ...]
    kinds: frozenset[str] = frozenset()
    tenants: frozenset[str] = frozenset()
    generated: bool = False
    """Made by ks_random_secret, ks_webhook_cert or ks_core_secret (never pruned), not by ks_manifest."""
    claims: frozenset[str] = frozenset()
    """Namespaces where its objects claim volumes (PersistentVolumeClaims, StatefulSets' volumeClaimTemplates)."""

    @property
    def object_kinds(self) -> set[str]:
        return {k for k, _, _ in self.objects}

    @property
    def scope(self) -> set[str]:
        """The kinds of the module's objects it prunes or removes."""
        return self.object_kinds | self.kinds

    @property
    def prunes(self) -> bool:
        return self.present and self.prune and not self.generated


def _refs(objects: Iterable[dict[str, Any]]) -> tuple[Ref, ...]:
    return tuple((f"{o['apiVersion']}/{o['kind']}", o["metadata"].get("namespace") or "", o["metadata"]["name"])
                 for o in objects)


def _generated(module: str, args: dict[str, Any]) -> Call | None:
    """What a call of one of the installer's other modules creates with the module's label (never pruned)."""
    ns = args.get("namespace") or ""
    if module == "ks_random_secret":
        objects: tuple[Ref, ...] = (("v1/Secret", ns, args["name"]),)
    elif module == "ks_webhook_cert":
        objects = (("v1/Secret", ns, args.get("secret") or WEBHOOK_CERT_ARGS["secret"]["default"]),)
    elif module == "ks_core_secret":
        objects = (("v1/Secret", ns, SECRET_NAME), (f"{USER_API}/User", "", ADMIN))
    else:
        return None
    return Call(module, module, True, False, objects, generated=True)


def calls_of(recorded: list[dict[str, Any]], run: str) -> list[Call]:
    """The ks_manifest calls and generated objects of one recorded run."""
    failed = [c["args"] for c in recorded if c["module"] == "ks_failed"]
    assert not failed, f"{run} failed (give the spec path a value the playbook accepts in CHANGED): {failed}"
    out = []
    for c in recorded:
        args = c["args"]
        if c["module"] != "ks_manifest":
            if (generated := _generated(c["module"], args)) is not None:
                out.append(generated)
            continue
        objects = load_definitions(args.get("definition") or [])
        claims = frozenset(o["metadata"].get("namespace") or "" for o in objects if o["kind"] == "PersistentVolumeClaim"
                           or (o["kind"] == "StatefulSet" and (o.get("spec") or {}).get("volumeClaimTemplates")))
        out.append(Call(args["ks_test_task"], args["ks_test_name"], (args.get("state") or "present") == "present",
                        _bool(args.get("prune"), True), _refs(objects), frozenset(args.get("kinds") or ()),
                        frozenset(args.get("tenants") or ()), claims=claims))
    return out


@dataclass(frozen=True)
class Runs:
    """A module's recorded install and uninstall runs, by spec variant."""

    install: dict[str, list[Call]]
    uninstall: dict[str, list[Call]]

    def applied(self, variant: str) -> list[Call]:
        return [c for c in self.install[variant] if c.present]

    def rendered(self, generated: bool = True) -> dict[Ref, str]:
        """Every object an install variant applies (and, with ``generated``, generates) → the first variant."""
        out: dict[Ref, str] = {}
        for variant in self.install:
            for call in self.applied(variant):
                if generated or not call.generated:
                    for ref in call.objects:
                        out.setdefault(ref, variant)
        return out

    def namespaces(self) -> set[str]:
        """The namespaces the module creates (the first module to create one owns it)."""
        return {name for kind, _, name in self.rendered() if kind == "v1/Namespace"}


def _tasks(module: Module, uninstall: bool) -> list[dict[str, Any]]:
    play = plays_of(module, uninstall)[0]
    return [{"ansible.builtin.import_role": {"name": r if isinstance(r, str) else r["role"]}}
            for r in play.get("roles", [])] + play.get("tasks", [])


def _plugins(root: Path) -> Path:
    """The recorders (test_declared_inputs.RECORDER over CLUSTER), written once under ``root``."""
    plugins = root / "action_plugins"
    if not plugins.exists():
        plugins.mkdir(parents=True)
        for name in RECORDED:
            recorder = RECORDER % (name, json.dumps(CLUSTER))
            (plugins / f"{name}.py").write_text(recorder + (TASK_RECORDER if name == "ks_manifest" else ""))
    return plugins


def run_module(module: Module, installs: dict[str, dict[str, Any]], uninstalls: dict[str, dict[str, Any]],
               root: Path) -> Runs:
    """The module's install playbook over each spec of ``installs`` and its uninstall playbook over each of
    ``uninstalls``: one ansible-playbook, a play for each and a host per run (as test_declared_inputs.run_variants;
    the uninstall with ``ks_action: uninstall``, as installer.runner runs it)."""
    plugins = _plugins(root)
    out = root / module.name
    out.mkdir(parents=True)
    groups = {action: {"hosts": {f"{action}{i}": {
        **spec, **FACTS, "ks_module": module.name, "ks_action": action, "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable} for i, spec in enumerate(specs.values())}}
        for action, specs in (("install", installs), ("uninstall", uninstalls))}
    (out / "inventory.json").write_text(json.dumps({"all": {"children": groups}}))
    record_failure = {"ks_failed": {"task": "{{ ansible_failed_task.name }}",
                                    "msg": "{{ ansible_failed_result.msg | default('') }}"}}
    playbook = [{"hosts": action, "gather_facts": False, "strategy": "free",
                 "tasks": [{"block": _tasks(module, uninstall), "rescue": [record_failure]}]}
                for action, uninstall in (("install", False), ("uninstall", True))]
    (out / "playbook.yaml").write_text(yaml.safe_dump(playbook))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(REPO / "roles"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOME": str(out / ".ansible"), "ANSIBLE_LOCAL_TEMP": str(out / "tmp"), "ANSIBLE_FORKS": "6",
           "ANSIBLE_ACTION_PLUGINS": str(plugins), "KS_CAPTURE_DIR": str(out)}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(out / "inventory.json"),
                           str(out / "playbook.yaml")], env=env, capture_output=True, text=True, timeout=600,
                          check=False)

    def recorded(host: str) -> list[dict[str, Any]]:
        capture = out / f"{host}.jsonl"
        assert capture.exists() or proc.returncode == 0, proc.stdout[-3000:]
        return [json.loads(line) for line in capture.read_text().splitlines()] if capture.exists() else []

    return Runs({name: calls_of(recorded(f"install{i}"), f"{module.name}'s install ({name})")
                 for i, name in enumerate(installs)},
                {name: calls_of(recorded(f"uninstall{i}"), f"{module.name}'s uninstall ({name})")
                 for i, name in enumerate(uninstalls)})


def _put(spec: dict[str, Any], path: str, value: Any) -> None:
    node = spec
    *parents, leaf = path.split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value


def spec_variants(module: Module) -> dict[str, dict[str, Any]]:
    """The default spec with the module on, every module on, and every module on with each declared input changed
    (as test_declared_inputs.variants changes it, and as CHANGED says below it). GLOBAL_INPUTS, the
    registry, zone and scheduling settings every workload module shares, place and name images and never choose
    objects: one variant changes them all (a host less per module and input: the test's time is its hosts')."""
    changed = variants(module, copy.deepcopy(all_on()), module.all_inputs, undeclared=False)
    out = {"default": only_this_on(module), "all on": changed.pop("base")}
    for name, spec in changed.items():
        path = name.removeprefix("input ")
        for below, value in CHANGED.items():
            if under(below, path):
                _put(spec, below, value)
        if path not in GLOBAL_INPUTS:
            out[name] = spec
        else:
            out.setdefault("input " + ", ".join(GLOBAL_INPUTS), copy.deepcopy(out["all on"]))
            _put(out["input " + ", ".join(GLOBAL_INPUTS)], path, get(spec, path))
    return out


def uninstall_variants(module: Module, installs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The default and the all-on spec, and the all-on spec with the module switched off (an uninstall's spec)."""
    out = {k: installs[k] for k in ("default", "all on")}
    if module.enabled.paths:
        off = copy.deepcopy(installs["all on"])
        for path in module.enabled.paths:
            _put(off, path, False if isinstance(get(off, path), bool) else "none")
        assert not module.enabled(off), module.name
        out["off"] = off
    return out


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Runs]]:
    """Every module's runs (spec_variants, uninstall_variants). Two modules' playbooks run at a time (one's start-up
    beside the other's tasks), those with most inputs first."""
    root = Path(tempfile.mkdtemp(prefix="ks-owned-kinds-"))
    _plugins(root)

    def run(module: Module) -> Runs:
        installs = spec_variants(module)
        return run_module(module, installs, uninstall_variants(module, installs), root)

    try:
        with ThreadPoolExecutor(2) as pool:
            order = sorted(MODULES, key=lambda m: -len(m.all_inputs))
            yield dict(zip([m.name for m in order], pool.map(run, order), strict=True))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _where(ns: str, name: str) -> str:
    return f"{ns}/{name}" if ns else name


def emptied(module: str, runs: dict[str, Runs]) -> set[str]:
    """The namespaces whose removal (prune or uninstall) removes what is in them: the module's alone, none of its
    volumes in them (those keep a namespace, installer.manifests.Manifests._remove)."""
    mine = runs[module]
    others = set().union(*(r.namespaces() for name, r in runs.items() if name != module))
    volumes = {ns for calls in mine.install.values() for c in calls for ns in c.claims}
    return mine.namespaces() - others - PREEXISTING - volumes


def left_by_uninstall(module: str, runs: dict[str, Runs]) -> dict[Ref, str]:
    """The objects an install variant applies that an uninstall run leaves (whatever KEPT says) → why.

    An uninstall removes the module's objects of the kinds of its calls, and with a namespace of :func:`emptied`
    everything in it. PersistentVolumeClaims stay unless it purges, and a purge finds them whatever the kinds."""
    mine = runs[module]
    rendered = mine.rendered()
    own = emptied(module, runs)
    left = {}
    for variant, calls in mine.uninstall.items():
        removed = set().union(*(c.scope for c in calls if not c.present))
        for (kind, ns, name), first in sorted(rendered.items()):
            if kind in removed or kind in KEPT_UNLESS_PURGED or (ns in own and "v1/Namespace" in removed):
                continue
            left.setdefault((kind, ns, name), f"applied in variant {first!r}, left by the uninstall in {variant!r}")
    return left


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_uninstall_removes_every_kind_the_module_applies(module: Module, runs: dict[str, Runs]) -> None:
    left = left_by_uninstall(module.name, runs)
    unexpected = [f"{kind} {_where(ns, name)} ({why})" for (kind, ns, name), why in left.items()
                  if (module.name, kind, name) not in KEPT]
    assert not unexpected, f"{module.name}: the uninstall leaves\n" + "\n".join(unexpected)
    stale = [key for key in KEPT if key[0] == module.name and not any(
        (kind, name) == key[1:] for kind, _, name in left)]
    assert not stale, f"KEPT names objects the module no longer applies or its uninstall removes: {stale}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_objects_in_another_modules_namespace_keep_it(module: Module, runs: dict[str, Runs]) -> None:
    """An uninstall deletes its module's namespace unless other modules' objects of TENANT_KINDS (or of the call's
    ``tenants``) are in it: in every variant, the module has one of those in each other module's namespace it
    uses, or its objects there would go with the namespace while the module is still on. An owner that is always
    on and that the module builds on is only removed after it (when everything is)."""
    mine = runs[module.name]
    unsafe = []
    for variant in mine.install:
        objects: dict[str, set[str]] = {}
        for call in mine.applied(variant):
            for kind, ns, _ in call.objects:
                if ns and ns not in PREEXISTING:
                    objects.setdefault(ns, set()).add(kind)
        for ns, kinds in sorted(objects.items()):
            owners = [m for m in MODULES if ns in runs[m.name].namespaces()]
            assert owners, f"{module.name}: {sorted(kinds)} in namespace {ns}, which no module creates"
            for owner in owners:
                if owner.name == module.name or (owner.enabled is always and owner.name in dependencies(module.name)):
                    continue
                for uninstall, calls in runs[owner.name].uninstall.items():
                    if any(not c.present and "v1/Namespace" in c.scope and not kinds & {*TENANT_KINDS, *c.tenants}
                           for c in calls):
                        unsafe.append(f"{sorted(kinds)} in {ns} (variant {variant!r}): {owner.name}'s uninstall "
                                      f"({uninstall!r}) deletes {ns} under them")
    assert not unsafe, f"{module.name}:\n" + "\n".join(unsafe)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_prune_looks_at_every_kind_its_task_applies(module: Module, runs: dict[str, Runs]) -> None:
    """A task that prunes and applies a kind in one variant only must prune that kind in the others: a variant
    that stops rendering it would leave it behind."""
    mine = runs[module.name]
    applies: dict[str, set[str]] = {}
    for variant in mine.install:
        for call in mine.applied(variant):
            if call.prunes:
                applies.setdefault(call.task, set()).update(call.object_kinds)
    missing = [f"task {call.name!r} ({call.task}) in variant {variant!r}: {sorted(lost)}"
               for variant in mine.install for call in mine.applied(variant)
               if call.prunes and (lost := applies[call.task] - call.scope)]
    assert not missing, f"{module.name}: tasks that do not prune kinds they apply\n" + "\n".join(missing)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_no_variant_leaves_what_another_applied(module: Module, runs: dict[str, Runs]) -> None:
    """Each object a variant applies is, in every other variant, applied, pruned or removed by some task, or in a
    namespace of :func:`emptied` that is (a task that prunes and does not run there prunes nothing)."""
    mine = runs[module.name]
    own = emptied(module.name, runs)
    left = []
    for variant, calls in mine.install.items():
        applied = {ref for c in calls if c.present for ref in c.objects}
        handled = set().union(*(c.scope for c in calls if c.prunes or not c.present))
        gone = {ns for ns in own if ("v1/Namespace", "", ns) not in applied} if "v1/Namespace" in handled else set()
        left += [f"{kind} {_where(ns, name)} (applied in {first!r}) in variant {variant!r}"
                 for (kind, ns, name), first in sorted(mine.rendered(generated=False).items())
                 if (kind, ns, name) not in applied and kind not in handled and ns not in gone]
    assert not left, f"{module.name}: no task applies, prunes or removes\n" + "\n".join(left)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_no_task_prunes_what_another_task_applies(module: Module, runs: dict[str, Runs]) -> None:
    """Prune deletes the module's objects of its kinds that the call did not apply, those of its other calls too."""
    mine = runs[module.name]
    pruned = []
    for variant, calls in mine.install.items():
        for call in calls:
            if not call.prunes:
                continue
            pruned += [f"task {call.name!r} prunes {kind} {_where(ns, name)} of {other.name!r} in {variant!r}"
                       for other in calls if other.present and other is not call
                       for kind, ns, name in other.objects
                       if kind in call.scope and (kind, ns, name) not in call.objects]
    assert not pruned, f"{module.name}:\n" + "\n".join(pruned)
