"""What ks-installer v3.4.1 made, read from tests/parity/upstream-v341/<profile> (rendered from upstream's own files
by hack/upstream_render.py), with the credentials upstream generated at install time filled in.

:func:`load` reads a profile's manifest and objects; :class:`Credentials` makes the values for its placeholders
(``<generated:NAME>``): the JWT key (32 random letters, as init-token's ``dd | base64 | tr``), the admin token signed
with it, redis' password (15 random letters), a new CA and serving certificate per chart that generated one (for the
names the chart's certificate had; valid for days only for the releases named ``due``), random letters for any other
generated string. ``hack/v341_cluster.py`` applies the filled objects as upstream did (:data:`HOW`).
"""

from __future__ import annotations

import base64
import copy
import json
import re
import secrets
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from installer.objects.certs import RENEW_BEFORE, generate
from installer.objects.core_secret import ADMIN_CLAIMS, jwt_hs256

REPO = Path(__file__).resolve().parents[1]
#: The tags rendered (hack/upstream_render.py) → their profiles: the default cc and every pluggable module, of v3.4.1
#: and of v3.3.2 (what most clusters ran before upstream's v3.4.1 installer upgraded them, where the switch from 3.3.x
#: starts).
TAGS: dict[str, tuple[str, ...]] = {"v3.4.1": ("default", "pluggable"), "v3.3.2": ("default", "pluggable")}


def fixtures_dir(tag: str = "v3.4.1") -> Path:
    """The committed render of ``tag``: tests/parity/upstream-v341, tests/parity/upstream-v332."""
    return REPO / "tests" / "parity" / f"upstream-{tag.replace('.', '')}"


FIXTURES = fixtures_dir()
#: How long a certificate that is due stays valid: within the installer's renewal window, so a switch replaces it.
DUE_VALIDITY = RENEW_BEFORE / 3
PLACEHOLDER = re.compile(r"<generated:([^>]+)>")
#: How upstream applied a step's objects (the manifest's ``how``).
HOW = {
    "kubectl-create-namespace": "kubectl create namespace, then kubectl label (system-workspace, namespace)",
    "kubectl-create-secret": "kubectl create secret generic --from-literal",
    "kubectl-apply": "kubectl apply (client-side; server-side --force-conflicts when the last-applied annotation "
                     "would be too long, as upstream's fallback)",
    "helm": "helm upgrade --install of the vendored chart",
    "kubectl-patch": "kubectl patch --type=merge (a Helm hook that was deleted on success, or a task's script)",
    "helm-crds": "helm install creating the chart's crds/ (not part of the release: field manager helm, no label)",
    "helm-create-namespace": "helm --create-namespace (a namespace without labels)",
    "kubectl-label-namespace": "kubectl label namespace --overwrite (the labels listed)",
}
Obj = dict[str, Any]


#: Kinds without a namespace (an object's ident has none); the render adds the checkout's cluster-scoped CRDs as
#: ``group/Kind`` (kubesphere's quota.kubesphere.io ResourceQuota is cluster-scoped, the core one is not).
CLUSTER_KINDS = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "APIService", "PriorityClass", "StorageClass", "PersistentVolume",
    "PodSecurityPolicy", "CSIDriver", "VolumeSnapshotClass", "VolumeSnapshotContent",
}


def ident(obj: Obj, namespace: str = "") -> str:
    """``Kind/namespace/name`` with the namespace it is applied to (``Kind/name`` when cluster-scoped)."""
    meta = obj["metadata"]
    group = obj.get("apiVersion", "").rpartition("/")[0]
    cluster = obj["kind"] in CLUSTER_KINDS or f"{group}/{obj['kind']}" in CLUSTER_KINDS
    ns = "" if cluster else (meta.get("namespace") or namespace or "default")
    return f"{obj['kind']}/{ns}/{meta['name']}" if ns else f"{obj['kind']}/{meta['name']}"


@dataclass
class Step:
    """One way upstream applied objects: written to the manifest by hack/upstream_render.py (:meth:`record`), read
    back by :func:`load` (:meth:`from_record`)."""

    how: str
    objects: list[Obj]
    namespace: str = ""
    release: str = ""
    chart: str = ""
    chart_version: str = ""
    source: str = ""
    hooks_deleted: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    """Objects the chart rendered twice (the last one kept)."""
    patches: list[Obj] = field(default_factory=list)
    """``kubectl patch --type=merge`` bodies (``how: kubectl-patch``): what a hook deleted on success did."""
    certificate: dict[str, Any] = field(default_factory=dict)
    """The serving certificate the chart generated: its common name, DNS names and its CA's common name."""
    recorded: list[str] = field(default_factory=list)
    """The manifest's idents, when read back (the render knew which custom kinds are cluster-scoped)."""

    @property
    def idents(self) -> list[str]:
        """:func:`ident` of each object, with the namespace it was applied to."""
        return self.recorded or [ident(o, self.namespace) for o in self.objects]

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"how": self.how, "source": self.source}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.release:
            out |= {"release": self.release, "chart": self.chart, "chart_version": self.chart_version}
        out["objects"] = self.idents
        if self.hooks_deleted:
            out["hooks_deleted"] = self.hooks_deleted
        if self.duplicates:
            out["duplicates_last_kept"] = self.duplicates
        if self.patches:
            out["patches"] = self.patches
        if self.certificate:
            out["certificate"] = self.certificate
        return out

    @classmethod
    def from_record(cls, rec: dict[str, Any], objects: list[Obj]) -> Step:
        assert len(objects) == len(rec["objects"]), f"{rec['source']}: objects out of step with the manifest"
        return cls(rec["how"], objects, rec.get("namespace", ""), rec.get("release", ""), rec.get("chart", ""),
                   rec.get("chart_version", ""), rec.get("source", ""), rec.get("hooks_deleted", []),
                   rec.get("duplicates_last_kept", []), rec.get("patches", []), rec.get("certificate", {}),
                   rec["objects"])


@dataclass
class Fixture:
    """A profile's committed render: per module (in upstream's order) its steps with their objects."""

    manifest: dict[str, Any]
    modules: dict[str, list[Step]]

    @property
    def spec_changes(self) -> dict[str, Any]:
        return self.manifest["spec_changes"]


def load(profile: str = "default", tag: str = "v3.4.1") -> Fixture:
    """The committed render of ``profile`` of ``tag``: each step's objects, matched to the manifest by order."""
    base = fixtures_dir(tag)
    root = base / profile
    manifest = json.loads((root / "manifest.json").read_text())
    modules: dict[str, list[Step]] = {}
    for module, records in manifest["modules"].items():
        shared = manifest.get("objects_from", {}).get(module)  # a module whose objects another profile holds
        objects = json.loads((base / (shared or profile) / f"{module}.json").read_text())
        steps = []
        for rec in records:
            count = len(rec["objects"])
            mine, objects = objects[:count], objects[count:]
            steps.append(Step.from_record(rec, mine))
        assert not objects, f"{module}: more objects than its manifest lists"
        modules[module] = steps
    return Fixture(manifest, modules)


#: The objects upstream made differently by Kubernetes version (hack/upstream_render.py --versions).
VERSIONS_FILE = REPO / "tests" / "parity" / "versions.json"


def at_version(fixture: Fixture, kubernetes: str, tag: str = "v3.4.1") -> Fixture:
    """``fixture`` (rendered at the pinned Kubernetes) as ``tag`` made it on a cluster of ``kubernetes``: each object
    ``VERSIONS_FILE`` lists gets that version's apiVersion and values, or is left out where that version made none
    (one it made only there, with no counterpart here, stays missing). Unchanged for another tag or a version the file
    has not rendered."""
    facts = json.loads(VERSIONS_FILE.read_text())
    if tag != facts["tag"] or kubernetes not in facts["versions"] or kubernetes == fixture.manifest["kubernetes"]:
        return fixture
    for module, steps in fixture.modules.items():
        for step in steps:
            kept: list[tuple[Obj, str]] = []
            for obj, key in zip(step.objects, step.idents, strict=True):
                entry = facts["objects"].get(f"{module}|{key}")
                if entry is None:
                    kept.append((obj, key))
                elif entry[kubernetes] is not None:
                    changed = {**copy.deepcopy(obj), "apiVersion": entry[kubernetes]["apiVersion"]}
                    for path, value in entry[kubernetes]["values"].items():
                        set_leaf(changed, path.strip("/").split("/"), value)
                    kept.append((changed, key))
            step.objects = [o for o, _ in kept]
            if step.recorded:
                step.recorded = [k for _, k in kept]
    return fixture


def set_leaf(node: Any, path: list[str], value: Any) -> None:
    """Set ``path`` (as hack/upstream_render.leaves names it: a list item by its ``name``, a ConfigMap's YAML text
    parsed) to ``value``; ``None`` removes it (a list item whole), and a container left empty goes with it."""
    step, rest = path[0], path[1:]
    if isinstance(node, list):
        index = next(i for i, item in enumerate(node) if item.get("name") == step)
        if value is None:
            del node[index]
        else:
            set_leaf(node[index], rest, value)
        return
    if not rest:
        if value is None:
            node.pop(step, None)
        else:
            node[step] = value
        return
    child = node.get(step)
    if isinstance(child, str):  # YAML text (a ConfigMap's data key)
        parsed = yaml.safe_load(child)
        changed = copy.deepcopy(parsed)
        set_leaf(changed, rest, value)
        if changed != parsed:  # the text as it was where the value is the same
            node[step] = yaml.safe_dump(changed, sort_keys=False)
        return
    if child is None:
        if value is None:
            return
        child = node[step] = {}
    set_leaf(child, rest, value)
    if child in ({}, []):
        del node[step]


def random_letters(length: int) -> str:
    return "".join(secrets.choice(string.ascii_letters) for _ in range(length))


class Credentials:
    """The values of a fixture's placeholders, made once (``values``: name → text). The certificates of the releases
    in ``due`` expire within days (:data:`DUE_VALIDITY`), as a fixed one a chart shipped did."""

    def __init__(self, fixture: Fixture, due: tuple[str, ...] = ()) -> None:
        self.values: dict[str, str] = {}
        key = random_letters(32)
        self.values["kubesphere-secret/secret"] = key
        self.values["kubesphere-secret/token"] = jwt_hs256(ADMIN_CLAIMS, key)
        self.values["redis-secret/auth"] = random_letters(15)
        for steps in fixture.modules.values():
            for step in steps:
                if step.certificate:
                    cert = step.certificate
                    validity = {"validity": DUE_VALIDITY} if step.release in due else {}
                    data = generate(cert["dns"], ca_name=cert.get("ca_name", "ca"),
                                    cert_name=cert.get("cert_name", cert["dns"][0]), **validity)
                    for name, value in data.items():
                        self.values[f"{step.release}/{name}"] = value.decode()

    def value(self, name: str) -> str:
        if name not in self.values:
            match = re.fullmatch(r".*/random(\d+)", name)
            assert match, f"no value for placeholder {name}"
            self.values[name] = random_letters(int(match.group(1)))
        return self.values[name]

    def fill(self, obj: Obj) -> Obj:
        """``obj`` with its placeholders' values: base64 in a Secret's ``data`` and in a ``caBundle``, as text
        elsewhere."""
        def walk(value: Any, encoded: bool) -> Any:
            if isinstance(value, dict):
                return {k: walk(v, encoded or k == "caBundle") for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v, encoded) for v in value]
            if isinstance(value, str) and "<generated:" in value:
                if encoded and (m := PLACEHOLDER.fullmatch(value)):
                    return base64.b64encode(self.value(m.group(1)).encode()).decode()
                return PLACEHOLDER.sub(lambda m: self.value(m.group(1)), value)
            return value
        out = {k: walk(v, False) for k, v in obj.items() if k != "data"}
        if "data" in obj:
            out["data"] = walk(obj["data"], obj["kind"] == "Secret")
        return out

    def secret_values(self, obj: Obj) -> dict[str, str]:
        """The generated values a Secret of the fixture holds, by key (what a takeover must keep)."""
        if obj["kind"] != "Secret":
            return {}
        return {k: self.value(m.group(1)) for k, v in (obj.get("data") or {}).items()
                if isinstance(v, str) and (m := PLACEHOLDER.fullmatch(v))}


def placeholders(fixture: Fixture) -> set[str]:
    """Every placeholder name the fixture holds."""
    text = json.dumps([[s.objects, s.patches] for steps in fixture.modules.values() for s in steps])
    return set(PLACEHOLDER.findall(text))
