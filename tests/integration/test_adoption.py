"""Taking over a cluster that ks-installer v3.4.1 installed: :func:`take_over`, the first reconcile over the original's
objects taking every module's objects over in place (installer.engine.adoption), run by test_adoption_pluggable.py
(v3.4.1, every component on) and test_adoption_v332.py (3.3.x); the default platform as upstream made it is switched by
tests/e2e/test_demo.py (``hack/demo.sh up --from-v341``, the real shell-operator). Here: MinIO's release (the App
Store's), whose fixed keys stay."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cert_watch import TrustWatch, bundle_cas, served, trusts
from installer_state import REPO
from kubernetes import client, config
from simcluster import SimCluster, tool_path
from v341_cluster import (
    DEFAULT,
    MINIO_KEYS,
    Builder,
    Profile,
    V341Cluster,
    build,
    deleted,
    live,
    restarted,
    revisions,
    snapshot,
    uid_of,
)

from installer.engine.state import StateStore
from installer.objects.field_takeover import HELM_LABEL, LAST_APPLIED, LEGACY_MANAGERS
from installer.objects.refs import ident
from installer.settings import FIELD_MANAGER, MODULE_LABEL, NAMESPACE

from .conftest import Installer, stored_state
from .test_minio import STORE, playbooks_without_core

pytestmark = pytest.mark.cluster

HELM_ANNOTATIONS = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")


def secret_value(api: client.ApiClient, namespace: str, name: str, key: str) -> str:
    data = client.CoreV1Api(api).read_namespaced_secret(name, namespace).data or {}
    return base64.b64decode(data[key]).decode()


def helm_list(sim: SimCluster, work: Path) -> list[str]:
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig), "HELM_CACHE_HOME": str(work),
           "HELM_CONFIG_HOME": str(work), "HELM_DATA_HOME": str(work)}
    proc = subprocess.run([str(tool_path("helm")), "list", "-A", "-q"], capture_output=True, text=True, env=env,
                          timeout=60, check=True)
    return sorted(proc.stdout.split())


@contextlib.contextmanager
def own_cluster(work: Path) -> Iterator[tuple[Installer, SimCluster]]:
    """A simulated cluster of the test's own with the installer's CRD and no cc, and the installer for it."""
    with SimCluster(work / "sim", die_with_parent=True) as sim:
        docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "kubesphere-installer.yaml").read_text())
                if d and d["kind"] in ("CustomResourceDefinition", "Namespace")]
        (work / "installer-crd.yaml").write_text(yaml.safe_dump_all(docs))
        sim.kubectl("apply", "-f", str(work / "installer-crd.yaml"))
        sim.kubectl("wait", "--for=condition=Established", "crd/clusterconfigurations.installer.kubesphere.io")
        api = config.new_client_from_config(config_file=str(sim.kubeconfig))
        try:
            yield Installer(api, str(sim.kubeconfig), work / "results"), sim
        finally:
            api.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Installer, SimCluster]]:
    """The installer with no state over a cluster of the test's own (the takeover leaves the original's objects and
    namespaces behind, which no later test of a shared cluster expects)."""
    with own_cluster(tmp_path) as made:
        yield made


@dataclass
class Takeover:
    """What a first reconcile over the fixture did, per module (the closing figures)."""

    made: V341Cluster
    built: float
    took: float = 0.0
    workloads: int = 0
    modules: dict[str, dict[str, int]] = field(default_factory=dict)
    retired: dict[str, list[str]] = field(default_factory=dict)
    restarted: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    """Objects created again in place of the original's (a field that cannot change differed)."""
    log: str = ""

    def table(self) -> str:
        rows = [f"fixture {self.built:.0f}s ({', '.join(f'{k} {v:.0f}s' for k, v in self.made.seconds.items())}), "
                f"first reconcile {self.took:.0f}s; nothing deleted, {len(self.replaced)} objects created again, "
                f"{len(self.restarted)} of {self.workloads} workloads restarted",
                f"{'module':<15} {'adopted':>8} {'pruned':>7} {'replaced':>9} {'left':>5} "
                f"{'restarted':>10}  releases retired"]
        for module, counts in sorted(self.modules.items()):
            rows.append(f"{module:<15} {counts['adopted']:>8} {counts['pruned']:>7} {counts['replaced']:>9} "
                        f"{counts['left']:>5} {counts['restarted']:>10}  "
                        f"{', '.join(self.retired.get(module, [])) or '-'}")
        return "\n".join(rows)


def previewed(installer: Installer, made: V341Cluster,
              recreated: frozenset[str] = frozenset()) -> dict[str, dict[str, str]]:
    """``plan --objects`` before the switch: every object of the original's that a module applies is shown as
    adopted (those of ``recreated`` as created again: a field that cannot change differs), with what the takeover
    removes; each module's releases to retire; no roll of kubesphere.yaml's readers
    (the original's file, parsed and without the keys they read from variables, is what ks-config renders: their pods
    roll once, with ks-core's new template); nothing is changed by it."""
    versions = {k: o["metadata"]["resourceVersion"] for k, o in snapshot(installer.api, made.refs).items()}
    # Every module's dry run over hundreds of found objects: a minute on an idle machine, more on a loaded one.
    proc = installer.cli("plan", "--objects", "-o", "json", timeout=900)
    assert proc.returncode == 1, proc.stderr[-3000:]
    plan = {m["module"]: m for m in json.loads(proc.stdout)["modules"]}
    for module, keys in made.adopted.items():
        shown = {o["object"]: o for o in plan[module]["objects"]}
        for key in keys:
            if key in shown and made.refs[key][1] != "CustomResourceDefinition":
                action = "recreate" if key in recreated else "update" if key in made.renewed else "adopt"
                assert shown[key]["action"] == action, (module, shown[key])
    rolls = {o["object"] for m in plan.values() for o in m["objects"] if o["action"] == "roll"}
    assert rolls == set(), rolls
    adopted = [o for m in plan.values() for o in m["objects"] if o["action"] == "adopt"]
    assert len(adopted) > 200
    assert any(f"metadata.annotations.{LAST_APPLIED}: removed (only kubectl-client-side-apply set it)" in o["fields"]
               for o in adopted)
    assert any("metadata.annotations.meta.helm.sh/release-name: removed (only helm set it)" in o["fields"]
               for o in adopted)
    for key, module in made.releases.items():
        if module:
            assert f"retires Helm release {key} (its release records, not its objects)" in plan[module]["notes"]
    assert {k: o["metadata"]["resourceVersion"] for k, o in snapshot(installer.api, made.refs).items()} == versions
    assert StateStore(installer.api).raw() == {}  # no state written either
    return {module: {o["object"]: o["action"] for o in m["objects"]} for module, m in plan.items()}


def run_actions(results: Path) -> dict[str, dict[str, str]]:
    """What each module's run did to each object it applied (``ks_manifest``'s change set, from its job events):
    its first action on each (a role that applies an object again later finds it as it left it)."""
    out: dict[str, dict[str, str]] = {}
    for module_dir in sorted(p for p in results.iterdir() if (p / "job_events").is_dir()):
        actions = out.setdefault(module_dir.name, {})
        for event in sorted((module_dir / "job_events").glob("*.json"), key=lambda f: int(f.name.split("-", 1)[0])):
            data = json.loads(event.read_text())
            if data.get("event") == "runner_on_ok":
                for ref, action in ((data["event_data"].get("res") or {}).get("changes") or {}).items():
                    actions.setdefault(ref, action)
    return out


def same_change_set(preview: dict[str, dict[str, str]], run: dict[str, dict[str, str]]) -> None:
    """The run did to every object it applied what ``plan --objects`` said it would (one change set, decided by the
    same code: installer.objects.planning), module by module. An object several modules apply (a namespace they
    share) is left out: the preview sees each module's run from the cluster as it is, the run of one module after
    another's wrote it."""
    counts = Counter(ref for actions in run.values() for ref in actions)
    differ = {module: {ref: (preview.get(module, {}).get(ref), action) for ref, action in actions.items()
                       if counts[ref] == 1 and preview.get(module, {}).get(ref) != action}
              for module, actions in run.items()}
    assert {m: d for m, d in differ.items() if d} == {}, "(preview, run) differ"
    assert sum(len(a) for a in run.values()) > 100


def take_over(installer: Installer, sim: SimCluster, work: Path, profile: Profile = DEFAULT,
              preview: Callable[[Installer, V341Cluster], dict[str, dict[str, str]] | None] | None = None,
              may_restart: frozenset[str] = frozenset(), may_replace: frozenset[str] = frozenset(),
              rolls_twice: frozenset[str] = frozenset()) -> Takeover:
    """Build the v3.4.1 cluster for ``profile``, (``preview``: a check of ``plan --objects`` first,) run the first
    reconcile and
    check the takeover: Ready, every enabled module recorded, nothing deleted (only the objects of ``may_replace``
    created again, each named in its module's status), no pod restarted but those of ``may_restart`` (once each;
    ``rolls_twice`` exactly twice: ks-core's template, then ks-config's roll onto a changed kubesphere.yaml), the
    original's managers' fields moved and pruned, its releases retired (the unknown one left), the leftovers listed.
    Returns the figures."""
    begin = time.monotonic()
    made = build(installer, sim, work / "v341", profile)
    result = Takeover(made, time.monotonic() - begin)
    api = installer.api
    known = sorted(k for k, module in made.releases.items() if module)
    assert helm_list(sim, work / "helm") == sorted(k.split("/")[1] for k in made.releases)
    foreseen = preview(installer, made) if preview is not None else None
    workloads = revisions(api, made)
    result.workloads = len(workloads)
    legacy_before = {k for k, obj in snapshot(api, made.refs).items() if _legacy(obj["metadata"])}

    # The reconcile (as reconcile_ok, keeping its log): every enabled module runs, as plan says. The webhook
    # certificates that are due are watched while it replaces them.
    planned = installer.planned()
    watches = {key: TrustWatch(api, key.split("/")[1], key.split("/")[2], service)
               for key, service in made.renewed.items()}
    begin = time.monotonic()
    with contextlib.ExitStack() as stack:
        for watched in watches.values():
            stack.enter_context(watched)
        proc = installer.reconcile()
    result.took = time.monotonic() - begin
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert installer.ran(proc) == planned
    log = proc.stderr
    if foreseen is not None:
        same_change_set(foreseen, run_actions(installer.results))
    assert set(planned) == made.modules

    # Ready, every enabled module recorded.
    assert installer.condition("Ready")["status"] == "True", installer.condition("Ready")
    assert made.modules <= set(stored_state(installer))

    # Nothing deleted (every object the original made is the same object, or one created again in its place because
    # a field that cannot change differed, as its module's status says), no pod restarted.
    changed = deleted(api, made)
    result.replaced = [k for k in changed if uid_of(api, made.refs[k]) is not None]
    assert [k for k in changed if k not in result.replaced] == []  # none is gone
    assert [k for k in result.replaced if k not in may_replace] == []
    named = " ".join(line for m in installer.status().get("modules", {}).values() for line in m.get("immutable") or [])
    assert [k for k in result.replaced if f"{k}: deleted and created again" not in named] == [], named
    after = revisions(api, made)
    result.restarted = restarted(workloads, after)

    # Adopted objects (what each module's run applied, and its generated Secrets): labelled, the original's
    # managers' fields moved to the installer and pruned. What a module leaves to the cluster stays as it was
    # (preinstall: the VolumeSnapshot CRDs, which it applies only when the cluster has none).
    records, _ = StateStore(api).load()
    objects = snapshot(api, made.refs)
    for module, keys in made.adopted.items():
        inventory = {ident({"kind": k, "metadata": {"namespace": ns, "name": n}})
                     for _, k, ns, n in records[module].inventory}
        pruned = left = 0
        for key in keys:
            obj = objects[key]
            meta = obj["metadata"]
            labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
            managers = {e["manager"] for e in meta.get("managedFields") or []}
            if key not in inventory and not (obj["kind"] == "Secret" and labels.get(MODULE_LABEL) == module):
                assert MODULE_LABEL not in labels and managers & LEGACY_MANAGERS, (key, labels, managers)
                left += 1
                continue
            assert labels.get(MODULE_LABEL) == module, (key, labels)
            assert LAST_APPLIED not in annotations, key
            assert labels.get(HELM_LABEL[0]) != HELM_LABEL[1], key
            assert not set(HELM_ANNOTATIONS) & set(annotations), key
            assert FIELD_MANAGER in managers and not managers & LEGACY_MANAGERS, (key, managers)
            pruned += key in legacy_before
        result.modules[module] = {"adopted": len(keys) - left, "pruned": pruned, "left": left,
                                  "replaced": sum(k in keys for k in result.replaced),
                                  "restarted": sum(k in keys for k in result.restarted)}

    # Helm: the original's releases retired (by the module that took them over), the unknown one left.
    unknown = sorted(k for k, module in made.releases.items() if not module)  # no module knows them: left
    assert helm_list(sim, work / "helm") == sorted(k.split("/")[1] for k in unknown)
    for release in known:
        module = made.releases[release]
        line = f"Retired Helm release {release}: its objects now belong to module {module}"
        assert line in log, line
        result.retired.setdefault(module, []).append(release)
    # Credentials: the original's values (its passwords, MinIO's keys, the webhook CAs), none of them logged, and
    # OpenLDAP's directory password.
    for ref, values in made.credentials.items():
        namespace, name = ref.split("/")
        for key, value in values.items():
            assert secret_value(api, namespace, name, key) == value, (ref, key)
            assert value not in log, (ref, key)
    assert secret_value(api, NAMESPACE, "openldap-secret", "password") == "admin"
    for key, watched in watches.items():
        renewed_in_order(api, key, watched, log)
    assert "[ks-core] kept the credentials that were there: Secret/kubesphere-system/kubesphere-secret" in log

    # What no module makes: logged and in status.adoption, not deleted.
    adoption = installer.status()["adoption"]
    for leftover in made.leftovers:
        assert leftover in adoption["unadopted"], (leftover, adoption)
        assert leftover in log, leftover
    for theirs in made.others:  # a user's own, applied with kubectl there: no record of the original names them
        assert theirs not in adoption["unadopted"] and theirs not in log, theirs
    assert adoption["helmReleases"] == unknown
    assert all(release in log for release in unknown)
    result.log = log

    # No pod restarted but those allowed (checked last: every other check above holds when this one fails); a
    # workload that rolls, rolls once (one new ReplicaSet / ControllerRevision): no module rolls it again.
    unexpected = sorted(k for k in result.restarted if k not in may_restart)
    print("restarted:", result.restarted)
    assert unexpected == [], unexpected
    rolls = {k: len(set(after[k][1]) - set(workloads[k][1])) for k in result.restarted}
    assert {k: n for k, n in rolls.items() if n != 1} == dict.fromkeys(rolls_twice, 2)
    return result


def renewed_in_order(api: client.ApiClient, key: str, watched: TrustWatch, log: str) -> None:
    """A webhook certificate that was due (``Secret/ns/name``, watched by ``watched`` during the run): replaced, as the
    log says; at every change of the Secret and of the webhook configurations, each webhook of its Service trusted
    the certificate the Secret held; at the end each one's caBundle is exactly the CA that issued the certificate its
    endpoint serves, which is the Secret's."""
    _, namespace, name = key.split("/")
    certificates = list(dict.fromkeys(s.certificate for s in watched.seen))
    print(f"{key}, watched: " + "; ".join(f"{s.what} (certificate {certificates.index(s.certificate) + 1})"
                                         for s in watched.seen))
    assert watched.replaced, watched.seen
    assert watched.distrusted == [], watched.distrusted
    assert f"Secret {namespace}/{name}: replaced the certificate found there: expires soon" in log
    certificate = watched.certificate()
    assert served(api, namespace, watched.service) == certificate
    hooks = watched.all_hooks()
    assert hooks, f"no webhook of Service {namespace}/{watched.service}"
    for hook, bundle in hooks.items():
        assert len(bundle_cas(bundle)) == 1 and trusts(bundle, certificate), hook


def _legacy(meta: dict[str, Any]) -> bool:
    return any(e.get("manager") in LEGACY_MANAGERS for e in meta.get("managedFields") or [])




def _minio_absent(sim: SimCluster, work: Path) -> None:
    """No release ks-minio, none of its objects (labelled or not), the PVC and the Secret included."""
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig), "HELM_CACHE_HOME": str(work),
           "HELM_CONFIG_HOME": str(work), "HELM_DATA_HOME": str(work)}
    subprocess.run([str(tool_path("helm")), "uninstall", "ks-minio", "-n", NAMESPACE, "--wait"], env=env,
                   capture_output=True, timeout=120, check=False)
    for kind, name in (("job", "minio-make-bucket-job"), ("deployment", "minio"), ("service", "minio"),
                       ("configmap", "minio"), ("serviceaccount", "ks-minio"), ("secret", "minio"), ("pvc", "minio")):
        sim.kubectl("delete", kind, "-n", NAMESPACE, name, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture
def minio_release(installer: Installer, sim_cluster: SimCluster, tmp_path: Path) -> Iterator[Installer]:
    """The platform (the ``platform`` marker) with the playbooks that MinIO needs none of doing nothing."""
    _minio_absent(sim_cluster, tmp_path / "helm")
    installer.env["KS_CONSOLE_TIMEOUT"] = "1"
    installer.env["KS_PLAYBOOKS_DIR"] = str(playbooks_without_core(tmp_path))
    yield installer
    _minio_absent(sim_cluster, tmp_path / "helm")


@pytest.mark.platform
def test_minio_release_taken_over_with_its_fixed_keys(minio_release: Installer, sim_cluster: SimCluster,
                                                      tmp_path: Path) -> None:
    """The original's release ks-minio (the server, its volume, Secret minio with upstream's fixed keys; its bucket
    Job was a hook, gone): the first install with the App Store keeps the keys and the objects, restarts nothing
    and retires the release."""
    installer, api = minio_release, minio_release.api
    builder = Builder(installer, sim_cluster, tmp_path / "v341")
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "minio", "namespace": NAMESPACE},
              "data": {k: base64.b64encode(v.encode()).decode() for k, v in MINIO_KEYS.items()}}
    # Rendered over the chart's keys (the pod template carries their digest, as the chart's did), then the release
    # makes the Secret.
    builder.kubectl("create", "-f", "-", input=json.dumps(secret))
    objects = [o for o in builder.rendered(installer.apply_cc(openpitrix=STORE), only=("minio",))["minio"]
               if o["kind"] != "Job"]
    builder.kubectl("-n", NAMESPACE, "delete", "secret", "minio")
    builder.helm_install("ks-minio", NAMESPACE, [*objects, secret])
    refs = {ident(o): (o["apiVersion"], o["kind"], NAMESPACE, o["metadata"]["name"]) for o in [*objects, secret]}
    uids = {key: live(api, ref).metadata.uid for key, ref in refs.items()}
    deployment = uids["Deployment/kubesphere-system/minio"]
    apps = client.AppsV1Api(api)
    deadline = time.monotonic() + 60

    def replica_sets() -> list[str]:
        return sorted(r.metadata.name for r in apps.list_namespaced_replica_set(NAMESPACE).items
                      if any(o.uid == deployment for o in r.metadata.owner_references or []))
    while not replica_sets() and time.monotonic() < deadline:
        time.sleep(0.5)
    before = replica_sets()
    assert before

    proc = installer.reconcile()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "minio" in installer.ran(proc)
    log = proc.stderr
    assert {k: secret_value(api, NAMESPACE, "minio", k) for k in MINIO_KEYS} == MINIO_KEYS
    assert "[minio] kept the credentials that were there: Secret/kubesphere-system/minio (keys accesskey, " \
           "secretkey)" in log
    assert not [v for v in MINIO_KEYS.values() if v in log]
    for key, ref in refs.items():
        meta = live(api, ref).to_dict()["metadata"]
        managers = {e["manager"] for e in meta.get("managedFields") or []}
        assert meta["uid"] == uids[key], key
        assert (meta.get("labels") or {}).get(MODULE_LABEL) == "minio", (key, meta.get("labels"))
        assert not set(HELM_ANNOTATIONS) & set(meta.get("annotations") or {}), key
        assert FIELD_MANAGER in managers and not managers & LEGACY_MANAGERS, (key, managers)
    assert replica_sets() == before  # the server was not restarted
    assert client.BatchV1Api(api).read_namespaced_job("minio-make-bucket-job", NAMESPACE).status.succeeded == 1
    assert "ks-minio" not in helm_list(sim_cluster, tmp_path / "helm")
    assert "Retired Helm release kubesphere-system/ks-minio: its objects now belong to module minio" in log
