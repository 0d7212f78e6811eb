"""Parity with ks-installer v3.4.1 on the simulated cluster.

For each inventory file in ``tests/parity/upstream`` (a module, or a variant of one), every object upstream
created must exist with its module's label ``installer.kubesphere.io/module=<module>``, unless
``tests/parity/expectations.yaml`` lists it as a documented gap; and every object the module labels must be
upstream's or an explained extra. Two reconciles cover everything, each one spec change as a user makes it: every
module and every additive variant on at once, then the variants that replace objects (redis HA, Elasticsearch
instead of OpenSearch); each must succeed. Then, with everything on, Pods are admitted through every module's
webhooks (Istio's injector among them), and still are once servicemesh, gatekeeper and events are switched off.
After the all-modules reconcile, what the objects say is checked too: CRDs' printer columns, and the content of
ConfigMaps, Secrets (key names), RBAC roles, PrometheusRules and webhook configurations against v3.4.1's
(``tests/parity/content``), except the differences ``expectations.yaml`` documents.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from all_on import ALL_ON, spec
from cluster_objects import applied_objects, delete_webhooks
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
from parity_content import Facts, cluster_facts, compare
from render_check import render_differences

from installer.engine.status import condition_of
from installer.modules import MODULES, get_module
from installer.settings import MODULE_LABEL
from installer.spec import merge

from .conftest import Installer, _reset, stored_state

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
PARITY = REPO / "tests" / "parity"
INVENTORY: dict[str, dict[str, Any]] = {
    p.stem: json.loads(p.read_text()) for p in sorted((PARITY / "upstream").glob("*.json"))}
EXPECTATIONS: dict[str, Any] = yaml.safe_load((PARITY / "expectations.yaml").read_text())
GAPS: dict[str, dict[str, str]] = EXPECTATIONS["gaps"]
EXTRAS: dict[str, dict[str, str]] = EXPECTATIONS["extras"]

# Variants that replace a module's objects, in a second reconcile.
REPLACING: dict[str, Any] = {"common": {"redis": {"enableHA": True}, "es": {"enabled": True}}}


# The spec each group's reconcile applies, in one change.
GROUPS: dict[str, dict[str, Any]] = {"all": spec(ALL_ON), "replacing": spec(ALL_ON, REPLACING)}
EVERY_MODULE = [m.name for m in MODULES]
# The modules with admission webhooks that the last test switches off together.
SWITCHED_OFF = ("servicemesh", "gatekeeper", "events")
MESH_DEFAULTS: dict[str, Any] = yaml.safe_load((REPO / "roles" / "servicemesh" / "defaults" / "main.yaml").read_text())


def ref(obj: dict[str, Any]) -> str:
    """``Kind/namespace/name`` (empty namespace for cluster-scoped objects), the key of the expectations."""
    return f"{obj['kind']}/{obj['namespace'] or ''}/{obj['name']}"


def transient(obj: dict[str, Any]) -> bool:
    """A Helm hook upstream deleted once it succeeded: not expected to stay."""
    return "hook-succeeded" in (obj.get("hook_delete_policy") or "")


def group_of(stem: str) -> str:
    return "replacing" if INVENTORY[stem].get("variant_mode") == "replace" else "all"


def files_of(module: str, group: str) -> list[str]:
    """The inventory files that describe ``module``'s objects after the reconcile of ``group``."""
    stems = [s for s, inv in INVENTORY.items() if inv["module"] == module]
    replacing = [s for s in stems if INVENTORY[s].get("variant_mode") == "replace" and group_of(s) == group]
    main = replacing or [s for s in stems if "variant_of" not in INVENTORY[s]]
    return main + [s for s in stems if INVENTORY[s].get("variant_mode") == "extend"]


@dataclass
class Snapshot:
    """The cluster after one reconcile: the label of each upstream object, and what each module labels."""

    found: dict[str, str | None] = field(default_factory=dict)
    """``ref`` of each upstream object → its module label ("" unlabelled, None missing or kind not served)."""
    owned: dict[str, set[str]] = field(default_factory=dict)
    modules: dict[str, Any] = field(default_factory=dict)
    """``status.modules`` of the cc."""
    seconds: float = 0.0
    """How long the reconcile took."""
    failure: str | None = None
    """Why the reconcile did not succeed (see :func:`failure`), None when it did."""
    crds: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every CRD as the API server serves it, by name."""
    content: dict[str, Facts] = field(default_factory=dict)
    render: dict[str, list[str]] = field(default_factory=dict)
    """Per module, where ``plan --objects --desired`` and the cluster disagree (tests/render_check.py)."""
    """``ref`` → content facts (tests/parity_content.py) of every labelled object of the compared kinds."""


def _resource(dyn: DynamicClient, api_version: str, kind: str) -> Any:
    """The served resource of ``kind``: its ``api_version``, else another served version of its group."""
    try:
        return dyn.resources.get(api_version=api_version, kind=kind)
    except ResourceNotFoundError:
        group = api_version.rpartition("/")[0]
        served = [r for r in dyn.resources.search(group=group, kind=kind) if group and r.preferred]
        return served[0] if served else None


def _label(dyn: DynamicClient, obj: dict[str, Any]) -> str | None:
    res = _resource(dyn, obj["apiVersion"], obj["kind"])
    if res is None:
        return None
    try:
        live = res.get(name=obj["name"], namespace=obj["namespace"] if res.namespaced else None)
    except NotFoundError:
        return None
    return (live.metadata.labels or {}).get(MODULE_LABEL) or ""


def failure(proc: subprocess.CompletedProcess[str], installer: Installer, expected: dict[str, str]) -> str | None:
    """Why the reconcile ``proc`` did not succeed, or None: its exit code, the cc's Ready condition, and each module
    of ``expected`` (module → phase) in another phase, with its failed task and message from the status."""
    status = installer.status()
    modules = status.get("modules") or {}
    ready = condition_of(status, "Ready")
    wrong = {m: modules.get(m) or {} for m, phase in expected.items() if (modules.get(m) or {}).get("phase") != phase}
    if proc.returncode == 0 and ready.get("status") == "True" and not wrong:
        return None
    return (f"reconcile exited {proc.returncode}, Ready {ready.get('status')} ({ready.get('reason')}: "
            f"{ready.get('message')})\n"
            + "".join(f"  {m}: {s.get('phase') or 'not in status.modules'} (want {expected[m]}), "
                      f"failed task {s.get('failedTask')!r}: {s.get('message')}\n" for m, s in sorted(wrong.items()))
            + f"results: {installer.results}\n--- end of the reconcile's log:\n{proc.stderr[-6000:]}")


def snapshot(installer: Installer, group: str) -> Snapshot:
    """Reconcile with the spec of ``group`` (one change), then read what the cluster has."""
    installer.put_spec(GROUPS[group])
    started = time.monotonic()
    proc = installer.reconcile()
    seconds = time.monotonic() - started
    dyn = DynamicClient(installer.api)
    dyn.resources.invalidate_cache()
    snap = Snapshot(owned=applied_objects(installer.api), modules=installer.status().get("modules") or {},
                    seconds=seconds, failure=failure(proc, installer, dict.fromkeys(EVERY_MODULE, "Installed")))
    for stem, inv in INVENTORY.items():
        if group_of(stem) == group:
            snap.found.update({ref(o): _label(dyn, o) for o in inv["objects"]})
    if group == "all":  # the CRD and content checks read every module's objects, all present only here
        snap.crds = {c.metadata.name: installer.api.sanitize_for_serialization(c)
                     for c in client.ApiextensionsV1Api(installer.api).list_custom_resource_definition().items}
        snap.content = cluster_facts(dyn)
        if snap.failure is None:
            with tempfile.TemporaryDirectory() as tmp:
                snap.render = render_differences(installer.api, installer.environ(), Path(tmp), installer.cc()["spec"],
                                                 stored_state(installer), sorted(EVERY_MODULE), digests=False)
    return snap


class Snapshots:
    """One reconcile per group, run when a test first needs it."""

    def __init__(self, installer: Installer) -> None:
        self.installer = installer
        self.taken: dict[str, Snapshot] = {}

    def __getitem__(self, group: str) -> Snapshot:
        if group not in self.taken:
            self.taken[group] = snapshot(self.installer, group)
        return self.taken[group]


@pytest.fixture(scope="module")
def snapshots(sim_cluster: Any, kube_api: client.ApiClient, installer_crd: None,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Snapshots]:
    _reset(kube_api)
    installer = Installer(kube_api, str(sim_cluster.kubeconfig), tmp_path_factory.mktemp("parity") / "results",
                          env={"KS_CONSOLE_TIMEOUT": "1"})
    yield Snapshots(installer)
    for module in ("servicemesh", "multicluster"):
        delete_webhooks(kube_api, module)
    _reset(kube_api)


@pytest.mark.slow(reason="installs every module in one reconcile (the suite's only all-modules install)")
@pytest.mark.parametrize("group", [pytest.param(g, marks=[pytest.mark.versions] if g == "all" else []) for g in GROUPS])
def test_one_change_reconciles(snapshots: Snapshots, group: str) -> None:
    """The group's spec, applied in one change, is reconciled: exit 0, Ready, every module Installed."""
    snap = snapshots[group]
    print(f"reconcile '{group}': {snap.seconds:.0f}s")
    assert snap.failure is None, f"the '{group}' reconcile ({snap.seconds:.0f}s) did not succeed: {snap.failure}"


@pytest.mark.versions
def test_offline_render_is_what_every_module_applied(snapshots: Snapshots) -> None:
    """One render path: ``plan --objects --desired`` renders, offline, exactly the objects every module applied (what
    they hold is compared for the default modules in test_plan_objects: here several embed credentials the cluster
    generated, or sizes read back from their live volumes)."""
    snap = snapshots["all"]
    assert snap.failure is None, snap.failure
    assert not snap.render, "\n" + "".join(f"{m}: {p}\n" for m, problems in snap.render.items() for p in problems)


# The additive group first: the second reconcile changes what the first one checked.
STEMS = sorted(INVENTORY, key=lambda s: (group_of(s) != "all", s))


@pytest.mark.parametrize("stem", STEMS)
def test_parity(snapshots: Snapshots, stem: str) -> None:
    inv = INVENTORY[stem]
    module, group = inv["module"], group_of(stem)
    snap = snapshots[group]
    gaps = GAPS.get(stem, {})
    expected = [ref(o) for o in inv["objects"] if not transient(o)]
    problems = [f"{r}: {'missing' if snap.found[r] is None else 'label ' + repr(snap.found[r])}"
                for r in expected if snap.found[r] != module and r not in gaps]
    stale = [r for r in gaps if snap.found.get(r) == module]
    upstream = {ref(o) for s in files_of(module, group) for o in INVENTORY[s]["objects"]}
    extras = sorted(snap.owned.get(module, set()) - upstream - set(EXTRAS.get(module, {})))
    present = sum(snap.found[r] == module for r in expected)
    print(f"parity {stem}: {present}/{len(expected)} present, {len(gaps)} documented gaps")
    assert not problems and not extras and not stale, (
        f"{module} ({stem}) after the '{group}' reconcile, status {snap.modules.get(module)}:\n"
        + "".join(f"  upstream object not applied: {p}\n" for p in problems)
        + "".join(f"  labelled but not upstream's nor an explained extra: {e}\n" for e in extras)
        + "".join(f"  documented gap that is now applied (remove it from expectations.yaml): {s}\n" for s in stale))


CRD_FACTS: dict[str, Any] = json.loads((PARITY / "crd_columns.json").read_text())["crds"]


def _columns(version: dict[str, Any]) -> list[list[Any]]:
    """A served version's printer columns in crd_columns.json's shape: [name, type, jsonPath, priority(,
    description)] (none of upstream's columns has a ``format``: one of ours would show as a difference)."""
    return [[c["name"], c["type"], c["jsonPath"], c.get("priority", 0)]
            + ([c["description"]] if c.get("description") else [])
            + ([{"format": c["format"]}] if "format" in c else [])
            for c in version.get("additionalPrinterColumns", [])]


def test_crds_show_what_upstreams_showed(snapshots: Snapshots) -> None:
    """What `kubectl get` shows of every CRD upstream applied, as the API server serves it after the all-modules
    reconcile: the printer columns of each served version, short names and categories (tests/parity/README.md)."""
    snap = snapshots["all"]
    assert snap.failure is None, "the all-modules reconcile failed (test_one_change_reconciles)"
    problems = []
    for name, expected in sorted(CRD_FACTS.items()):
        crd = snap.crds.get(name)
        if crd is None:
            problems.append(f"{name}: not applied")
            continue
        spec = crd["spec"]
        shown = {"versions": {v["name"]: _columns(v) for v in spec["versions"] if v.get("served", True)},
                 "shortNames": spec["names"].get("shortNames", []),
                 "categories": spec["names"].get("categories", [])}
        problems += [f"{name} {key}: {shown[key]} (upstream: {expected[key]})"
                     for key in ("versions", "shortNames", "categories") if shown[key] != expected[key]]
    assert not problems, "\n".join(problems)


CONTENT: dict[str, dict[str, Any]] = {p.stem: json.loads(p.read_text())
                                      for p in sorted((PARITY / "content").glob("*.json"))}
CONTENT_DOCUMENTED: dict[str, dict[str, str]] = EXPECTATIONS["content"]
GAP_REFS = {r for entries in GAPS.values() for r in entries}


@pytest.mark.parametrize("module", CONTENT)
def test_content_says_what_upstreams_said(snapshots: Snapshots, module: str) -> None:
    """After the all-modules reconcile, each object of tests/parity/content/<module>.json (ConfigMaps' data, Secrets'
    key names, RBAC rules, PrometheusRules' expressions, webhooks' rules) says what upstream's did, except the
    differences ``content:`` in expectations.yaml documents (per object, per path)."""
    snap = snapshots["all"]
    assert snap.failure is None, "the all-modules reconcile failed (test_one_change_reconciles)"
    objects = {r: paths for r, paths in CONTENT[module]["objects"].items() if r not in GAP_REFS}
    result = compare(objects, snap.content, CONTENT_DOCUMENTED)
    print(f"content {module}: {result.summary(len(objects))}")
    assert not result.problems, f"{module}: content differs from upstream's:\n  " + "\n  ".join(result.problems)


def _pod_running(core: client.CoreV1Api, namespace: str, name: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while (phase := core.read_namespaced_pod(name, namespace).status.phase) != "Running":
        assert time.monotonic() < deadline, f"Pod {namespace}/{name} is {phase} after {timeout:.0f}s"
        time.sleep(0.5)


def _admit(core: client.CoreV1Api, namespace: str) -> str:
    """Create a Pod in ``namespace`` and see it Running; its name. Fails with the API server's message when an
    admission webhook refuses it."""
    name = f"parity-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "example.invalid/app:1"}],
                     "terminationGracePeriodSeconds": 0}}
    try:
        core.create_namespaced_pod(namespace, body)
    except ApiException as exc:
        raise AssertionError(f"Pod {namespace}/{name} refused: {exc.status} {exc.body!r}") from exc
    _pod_running(core, namespace, name)
    return name


def _webhook_configurations(api: client.ApiClient, module: str) -> list[str]:
    admission = client.AdmissionregistrationV1Api(api)
    selector = f"{MODULE_LABEL}={module}"
    return [f"MutatingWebhookConfiguration/{w.metadata.name}"
            for w in admission.list_mutating_webhook_configuration(label_selector=selector).items] + \
        [f"ValidatingWebhookConfiguration/{w.metadata.name}"
         for w in admission.list_validating_webhook_configuration(label_selector=selector).items]


def test_pods_admitted_with_every_webhook_and_after_switching_some_off(snapshots: Snapshots, sim_cluster: Any,
                                                                       kube_api: client.ApiClient) -> None:
    """With every module on, Pods are admitted in ``default`` and in a namespace labelled for Istio's injection
    (whose injector is called); with servicemesh, gatekeeper and events switched off in one change, their
    uninstalls leave none of their webhook configurations and Pods are still admitted."""
    assert snapshots["all"].failure is None, "the all-modules reconcile failed (test_one_change_reconciles)"
    installer, core = snapshots.installer, client.CoreV1Api(kube_api)
    rev = MESH_DEFAULTS["ks_servicemesh_revision"]
    istio_ns = get_module("servicemesh").run_facts()["ks_servicemesh_namespace"]
    meshed = f"parity-mesh-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": meshed, "labels": {"istio.io/rev": rev}}})
    pods: list[str] = []
    try:
        for module in SWITCHED_OFF:
            assert _webhook_configurations(kube_api, module), f"{module} registered no admission webhook"
        pods.append(_admit(core, "default"))
        injected = _admit(core, meshed)
        call = f" istiod-{rev}.{istio_ns}.svc/inject CREATE pods {meshed}/{injected} "
        log = (sim_cluster.logs / "sim-webhooks.log").read_text(errors="replace")
        assert call in log, f"Istio's injector was not called for Pod {meshed}/{injected}"

        live = installer.cc()["spec"]
        merge(live, {module: {"enabled": False} for module in SWITCHED_OFF})
        installer.put_spec(live)
        proc = installer.reconcile()
        problem = failure(proc, installer, {m: "Uninstalled" for m in SWITCHED_OFF} | {
            m.name: "Installed" for m in MODULES if m.enabled(live)})
        assert problem is None, f"switching off {', '.join(SWITCHED_OFF)} did not succeed: {problem}"
        assert set(SWITCHED_OFF) <= set(installer.ran(proc)), installer.ran(proc)
        left = {m: hooks for m in SWITCHED_OFF if (hooks := _webhook_configurations(kube_api, m))}
        assert not left, f"webhook configurations left after the uninstalls: {left}"
        pods.append(_admit(core, "default"))
        _admit(core, meshed)
    finally:
        for name in pods:
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        with contextlib.suppress(ApiException):
            core.delete_namespace(meshed)
