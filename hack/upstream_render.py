"""Render what ks-installer v3.4.1 (and v3.3.2) made, from upstream's own files, into tests/parity/upstream-v341
(upstream-v332; derived output).

Not part of the installer: it reads a fetched checkout of ``github:kubesphere/ks-installer`` (a bare git directory;
``--git-dir``, default ``$KS_UPSTREAM_GIT_DIR`` or the fetch tool's mirror), unpacks the roles it needs at the tag
into a temporary directory outside the project, and for each module follows upstream's tasks:

- its Jinja2 templates with Ansible's variables (``roles/kubesphere-defaults``, ``roles/download``, the roles'
  ``defaults/``, the facts the tasks set, then the spec of upstream's ``deploy/cluster-configuration.yaml`` with the
  profile's changes as extra vars: top-level keys replace, as Ansible's ``hash_behaviour=replace``), with Ansible's
  own filters and tests;
- its vendored charts with the real ``helm template`` and the values files and ``--set`` flags its tasks pass;
- the Secrets it made with ``kubectl create secret``.

Output, per profile directory: ``<module>.json`` (the objects, as upstream's kubectl / helm saw them, in the order
they were applied) and ``manifest.json`` (the cc the user applied: the tag's ``deploy/cluster-configuration.yaml``
labels and spec with the profile's changes; per module, each step: how it was applied — ``kubectl-create-namespace``,
``kubectl-create-secret``, ``kubectl-apply`` with its ``-n``, ``helm`` with release, namespace, chart and version —
and the objects it holds, ``Kind/namespace/name``). What upstream generated at install time is a placeholder
``<generated:NAME>`` that the fixture (hack/upstream_fixture.py) fills at apply time: the JWT key and token, redis'
password, each chart's generated CA / serving certificate / key (``<generated:RELEASE/ca.crt>`` ...), each chart's
random strings. Helm hooks deleted on success are listed in the step (``hooks_deleted``), not kept. A module whose
objects are the default profile's is read from there (the manifest's ``objects_from``).

Profiles (:data:`PROFILES`): ``default`` (the default cc with Redis and OpenLDAP) and ``pluggable`` (every pluggable
module as well; Istio itself, which v3.4.1 installed with ``istioctl`` from tarballs the fetched checkout lacks, is
not rendered).

Tags (:data:`TAGS`): v3.4.1 and v3.3.2 (the cluster upstream's v3.4.1 installer upgraded), both profiles. The same
steps read each tag's files; where the tags' roles differ, the step says so (``monitoring``; v3.3.2's log store is
the Elasticsearch of ``es-install.yaml``, :func:`elasticsearch`, and its Outputs write there; its charts' versions
differ, :func:`chart`; its pluggable cc has no ``common.opensearch``, :data:`TAG_PROFILES`).

    hack/upstream_render.py                 render and write the committed files
    hack/upstream_render.py --tag v3.3.2    only that tag's profiles
    hack/upstream_render.py --check         render and diff against the committed files (exit 1 on a difference)
    hack/upstream_render.py --versions      v3.4.1's objects that differ by Kubernetes version (:data:`VERSIONS`), per
                                            version, and Redis HA's objects per version, into
                                            tests/parity/versions.json (with --check: diff only)
"""

from __future__ import annotations

import argparse
import base64
import copy
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import yaml
from upstream_fixture import CLUSTER_KINDS, TAGS, Step, fixtures_dir, ident

REPO = Path(__file__).resolve().parents[1]
MIRROR = Path("/work/.mirror/kubesphere+ks-installer/repo")
KUBE_VERSION = "v1.34.4"
#: What a real cluster with the monitoring module's CRDs advertises (charts check some with .Capabilities): the same
#: on every version from v1.21 on (batch/v1 CronJob and policy/v1 PodDisruptionBudget are served from v1.21).
API_VERSIONS = ("monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor",
                "monitoring.coreos.com/v1/PrometheusRule", "batch/v1/CronJob", "policy/v1/PodDisruptionBudget",
                "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1")
#: The roles (and other paths) unpacked from the tag (the whole tree does not unpack: two istio tarballs are absent).
PATHS = ("roles/kubesphere-defaults", "roles/download", "roles/common", "roles/ks-core", "roles/ks-monitor",
         "roles/preinstall", "roles/ks-events", "roles/ks-auditing", "roles/ks-logging", "roles/ks-devops",
         "roles/gatekeeper", "roles/ks-multicluster", "roles/ks-istio/files/jaeger", "roles/ks-istio/files/kiali",
         "roles/ks-istio/templates", "roles/edgeruntime", "deploy/cluster-configuration.yaml")
#: The roles whose tasks set ``ks_kubectl_tag`` from ``ks_kubectl_versions`` by the cluster's version.
KUBECTL_TAG_ROLES = {"ks-core/config", "ks-events", "ks-multicluster"}
Obj = dict[str, Any]


def helm_binary() -> Path:
    versions = dict(line.split("=", 1) for line in (REPO / "hack" / "versions.env").read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    version = versions.get("HELM_VERSION", "v3.19.5").strip().strip('"')
    return Path(os.environ.get("KS_TOOLS_DIR", Path.home() / ".cache" / "ks-installer" / "bin")) / f"helm-{version}"


# -- Ansible's templating, as far as upstream's templates need it
class Undef(jinja2.ChainableUndefined):
    """``a.b is defined`` and ``default`` work through missing parents; printing a missing variable fails."""

    def __str__(self) -> str:
        raise jinja2.UndefinedError(f"undefined variable in output: {self._undefined_name}")


def environment() -> jinja2.Environment:
    from ansible.plugins.filter.core import FilterModule
    from ansible.plugins.test.core import TestModule

    env = jinja2.Environment(trim_blocks=True, undefined=Undef, keep_trailing_newline=True,
                             extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
    env.filters.update({k: v for k, v in FilterModule().filters().items() if k not in env.filters})
    env.tests.update({k: v for k, v in TestModule().tests().items() if k not in env.tests})
    return env


def resolved(variables: dict[str, Any], env: jinja2.Environment) -> dict[str, Any]:
    """``variables`` with templated strings rendered until nothing changes (those that fail stay as they are)."""
    def walk(value: Any, scope: dict[str, Any]) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, scope) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, scope) for v in value]
        if isinstance(value, str) and ("{{" in value or "{%" in value):
            try:
                return env.from_string(value).render(scope)
            except Exception:  # a default upstream never uses here (groups, hostvars, ipaddr)
                return value
        return value
    for _ in range(6):
        new = walk(variables, variables)
        if new == variables:
            break
        variables = new
    return variables


class Loader(yaml.SafeLoader):
    """YAML as kubectl reads it: a bare ``=`` is a string (PyYAML's YAML 1.1 'value' tag is not)."""


Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


def documents(text: str) -> list[Obj]:
    out = []
    # Go's YAML reads ``\'`` in a double-quoted scalar as ``'`` (ks-devops' cluster templates hold it); PyYAML fails.
    for doc in yaml.load_all(re.sub(r"\\'", "'", text), Loader=Loader):  # a SafeLoader
        if not doc:
            continue
        if doc.get("kind") == "List" and "items" in doc:
            out += [d for d in doc["items"] if d]
        else:
            out.append(doc)
    return out


def dump(objects: list[Obj]) -> str:
    """A JSON list, one object a line (reads in milliseconds: the monitoring CRDs alone are 2 MB of YAML)."""
    return "[\n" + ",\n".join(json.dumps(o, ensure_ascii=False) for o in objects) + "\n]\n"


class Upstream:
    """The unpacked tag, its variables for ``spec`` and its renderers."""

    def __init__(self, git_dir: Path, root: Path, spec_changes: dict[str, Any], tag: str = "v3.4.1",
                 kube_version: str = KUBE_VERSION) -> None:
        self.git_dir, self.root, self.tag, self.kube_version = git_dir, root, tag, kube_version
        proc = subprocess.run(["git", f"--git-dir={git_dir}", "archive", tag, *PATHS], capture_output=True,
                              check=True, timeout=300)
        with tarfile.open(fileobj=__import__("io").BytesIO(proc.stdout)) as tar:
            tar.extractall(root, filter="data")
        self.commit = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", f"{tag}^{{commit}}"],
                                     capture_output=True, text=True, check=True).stdout.strip()
        self.env = environment()
        cc = yaml.safe_load((root / "deploy" / "cluster-configuration.yaml").read_text())
        self.spec = merge(cc["spec"], spec_changes)
        self.cc = {"labels": cc["metadata"].get("labels") or {}, "spec": self.spec}
        self.cluster_kinds = set(CLUSTER_KINDS)
        for text in crd_texts(root):
            try:
                for doc in yaml.safe_load_all(text):
                    if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition" and \
                            doc.get("spec", {}).get("scope") == "Cluster":
                        self.cluster_kinds.add(f"{doc['spec']['group']}/{doc['spec']['names']['kind']}")
            except yaml.YAMLError:
                continue
        CLUSTER_KINDS.update(self.cluster_kinds)

    def variables(self, *roles: str, facts: dict[str, Any] | None = None) -> dict[str, Any]:
        """Ansible's variables for a play of ``roles``: defaults (lowest), the tasks' facts, then the spec."""
        out: dict[str, Any] = {}
        for role in ("kubesphere-defaults", "download", *roles):
            for name in ("main.yaml", "main.yml"):
                path = self.root / "roles" / role / "defaults" / name
                if path.exists():
                    out.update(yaml.safe_load(path.read_text()) or {})
        out |= {"kubernetes_version": self.kube_version, "kube_version": self.kube_version, "enableHA": False,
                "master_num": "1", "status": {}, "nodeNum": 1, "container_runtime": "containerd",
                **(facts or {})}
        out |= copy.deepcopy(self.spec)
        out = resolved(out, self.env)
        tags = out.get("ks_kubectl_versions") or {}
        # The roles whose tasks set ks_kubectl_tag to the first entry the cluster's version reaches (their loop);
        # every other role keeps roles/download's default.
        if set(roles) & KUBECTL_TAG_ROLES:
            out["ks_kubectl_tag"] = next(tag for minimum, tag in tags.items() if self.at_least(minimum))
        return resolved(out, self.env)

    def at_least(self, version: str) -> bool:
        """Whether the cluster's Kubernetes is ``version`` or later (Ansible's ``version`` test, as the tasks')."""
        return self.env.from_string("{{ v is version(m, '>=') }}").render(v=self.kube_version, m=version) == "True"

    def template(self, path: str, variables: dict[str, Any]) -> str:
        return self.env.from_string((self.root / path).read_text()).render(variables)

    def files(self, directory: str, rendered: dict[str, str] | None = None) -> list[tuple[str, str]]:
        """``kubectl apply -f DIR``'s files (not recursive; .yaml/.yml/.json), with rendered templates replacing
        the files of the same name (upstream renders into the copied directory)."""
        rendered = rendered or {}
        names = {p.name: p.read_text() for p in sorted((self.root / directory).iterdir())
                 if p.is_file() and p.suffix in (".yaml", ".yml", ".json")}
        names |= rendered
        return [(f"{directory}/{n}", names[n]) for n in sorted(names)]

    def helm(self, release: str, chart: str, namespace: str, values: list[str], sets: tuple[str, ...] = (),
             source: str = "", prepare: Callable[[Path], None] | None = None) -> Step:
        """``helm upgrade --install`` as ``helm template``: objects without the chart's CRDs (upstream applied
        them with kubectl first, so Helm skipped them), hooks deleted on success left out, generated values
        replaced by placeholders (found by rendering twice)."""
        with tempfile.TemporaryDirectory() as tmp:
            chart_dir = self.chart_dir(chart, Path(tmp))
            if prepare is not None:
                if not chart.endswith(".tgz"):
                    copied = Path(tmp) / "chart"
                    shutil.copytree(chart_dir, copied)
                    chart_dir = copied
                prepare(chart_dir)
            files = []
            for i, text in enumerate(values):
                path = Path(tmp) / f"values-{i}.yaml"
                path.write_text(text)
                files += ["-f", str(path)]
            meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
            args = [str(helm_binary()), "template", release, str(chart_dir), "--namespace", namespace, *files,
                    "--kube-version", self.kube_version, *[f"--api-versions={v}" for v in API_VERSIONS],
                    *[x for s in sets for x in ("--set", s)]]
            env = {**os.environ, "HELM_CACHE_HOME": tmp, "HELM_CONFIG_HOME": tmp, "HELM_DATA_HOME": tmp}
            runs = [documents(subprocess.run(args, capture_output=True, text=True, check=True, env=env,
                                             timeout=120).stdout) for _ in range(2)]
        objects, hooks, cert = [], [], {}
        for first, second in zip(*runs, strict=True):
            annotations = first["metadata"].get("annotations") or {}
            if "helm.sh/hook" in annotations:
                kinds = {h.strip() for h in annotations["helm.sh/hook"].split(",")}
                if not kinds & {"pre-install", "post-install"}:
                    continue  # a test, delete or rollback hook: an install never creates it
                if "hook-succeeded" in annotations.get("helm.sh/hook-delete-policy", ""):
                    named = first if first["metadata"]["name"] == second["metadata"]["name"] else {
                        **first, "metadata": {**first["metadata"], "name": "<random>"}}  # a random name per install
                    hooks.append(ident(named, namespace))
                    continue
            objects.append(first if first == second else placeholders(first, second, release, cert))
        objects = renewed(objects, release, cert)
        # An object the chart renders twice (notification-manager: its Secret with a fixed key pair in tls.yaml,
        # then the generated one in validating.yaml): the install's concurrent creates fail on the second and the
        # task's retry (``helm upgrade --install --force``) applies them in order, so the last one stays.
        keys = [ident(o, namespace) for o in objects]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        objects = [o for i, o in enumerate(objects) if keys[i] not in keys[i + 1:]]
        return Step("helm", objects, namespace, release, meta["name"], str(meta["version"]), source or chart,
                    hooks_deleted=hooks, certificate=cert, duplicates=duplicates)

    def chart_dir(self, chart: str, tmp: Path) -> Path:
        """The vendored chart's directory; a ``.tgz`` chart unpacked into ``tmp`` first."""
        if not chart.endswith(".tgz"):
            return self.root / chart
        with tarfile.open(self.root / chart) as tar:
            tar.extractall(tmp, filter="data")
        return next(p for p in tmp.iterdir() if p.is_dir())

    def chart_crds(self, chart: str, source: str = "") -> Step:
        """The CRDs of a chart's ``crds/`` directories (its subcharts' too), which ``helm install`` created itself
        (not part of the release: no Helm label or annotation, field manager ``helm``)."""
        with tempfile.TemporaryDirectory() as tmp:
            chart_dir = self.chart_dir(chart, Path(tmp))
            paths = sorted(p for p in chart_dir.rglob("*") if p.parent.name == "crds" and p.is_file()
                           and p.suffix in (".yaml", ".yml", ".json"))
            objects = [o for p in paths for o in documents(p.read_text())]
        seen: set[str] = set()
        unique = [o for o in objects if not (ident(o) in seen or seen.add(ident(o)))]
        return Step("helm-crds", unique, source=source or f"{chart}/crds")


def crd_texts(root: Path) -> list[str]:
    """The YAML files under ``root`` that hold a CRD, those of packed charts (``.tgz``) too."""
    texts = [t for p in root.rglob("*.yaml") if "CustomResourceDefinition" in (t := p.read_text(errors="replace"))]
    for path in root.rglob("*.tgz"):
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith((".yaml", ".yml")):
                    data = tar.extractfile(member)
                    text = data.read().decode(errors="replace") if data else ""
                    if "CustomResourceDefinition" in text:
                        texts.append(text)
    return texts


def merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` (``a__b`` paths, as v341_cluster.Profile) set."""
    out = copy.deepcopy(base)
    for path, value in changes.items():
        node = out
        *parents, leaf = path.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def placeholders(first: Any, second: Any, release: str, cert: dict[str, Any]) -> Any:
    """``first`` with each value that differs in ``second`` (generated by the chart) named: a certificate or key by
    what it is, any other by its length. ``cert`` gets the serving certificate's names."""
    if isinstance(first, dict):
        return {k: placeholders(v, second.get(k), release, cert) for k, v in first.items()}
    if isinstance(first, list):
        return [placeholders(a, b, release, cert) for a, b in zip(first, second, strict=True)]
    if first == second or not isinstance(first, str):
        return first
    text = first
    with __import__("contextlib").suppress(Exception):
        text = base64.b64decode(first, validate=True).decode()
    if "BEGIN CERTIFICATE" in text:
        from cryptography import x509
        pem = x509.load_pem_x509_certificate(text.encode())
        name = pem.subject.rfc4514_string().removeprefix("CN=")
        try:
            ca = pem.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            ca = False
        if ca:
            cert["ca_name"] = name
            return f"<generated:{release}/ca.crt>"
        names = pem.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        cert |= {"cert_name": name, "dns": names.get_values_for_type(x509.DNSName)}
        return f"<generated:{release}/tls.crt>"
    if "PRIVATE KEY" in text:
        return f"<generated:{release}/tls.key>"
    return f"<generated:{release}/random{len(first)}>"


#: A fixed certificate a chart ships that expired before this date is renewed in the fixture (a cluster built today
#: could not use it: ks-devops' s2i webhook CA expired on 2024-02-14, and its webhook refuses every S2I template).
EXPIRED_BEFORE = __import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").UTC)


def common_name(pem: Any) -> str:
    from cryptography.x509.oid import NameOID

    return str(pem.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def renewed(objects: list[Obj], release: str, cert: dict[str, Any]) -> list[Obj]:
    """``objects`` where a Secret holding a fixed certificate chain that expired (before :data:`EXPIRED_BEFORE`) has
    placeholders instead, as a generated one (its CA in the release's caBundles too); ``cert`` gets its names."""
    from cryptography import x509

    names: dict[str, str] = {}  # a value of the expired chain → its placeholder
    for obj in objects:
        data = obj.get("data") or {}
        pems: dict[str, x509.Certificate] = {}
        for key, value in data.items():
            with __import__("contextlib").suppress(Exception):
                pems[key] = x509.load_pem_x509_certificate(base64.b64decode(value))
        if obj["kind"] != "Secret" or not pems or min(c.not_valid_after_utc for c in pems.values()) >= EXPIRED_BEFORE:
            continue
        assert not cert, f"{release}: a second certificate"
        for key, pem in pems.items():
            try:
                ca = pem.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
            except x509.ExtensionNotFound:
                ca = False
            if ca:
                names[data[key]] = f"<generated:{release}/ca.crt>"
                cert["ca_name"] = common_name(pem)
            else:
                names[data[key]] = f"<generated:{release}/tls.crt>"
                san = pem.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                cert |= {"cert_name": common_name(pem), "dns": san.get_values_for_type(x509.DNSName)}
        names |= {v: f"<generated:{release}/tls.key>" for v in data.values()
                  if "PRIVATE KEY" in base64.b64decode(v).decode(errors="replace")}
    if not names:
        return objects
    text = "\n".join(json.dumps(o) for o in objects)
    for value, placeholder in names.items():
        text = text.replace(json.dumps(value), json.dumps(placeholder))
    return [json.loads(line) for line in text.split("\n")]


# -- the modules, as upstream's tasks apply them
def apply_step(up: Upstream, files: list[tuple[str, str]], namespace: str = "", source: str = "") -> Step:
    objects = [o for _, text in files for o in documents(text)]
    return Step("kubectl-apply", objects, namespace, source=source or ", ".join(p for p, _ in files))


def preinstall(up: Upstream) -> list[Step]:
    """roles/common: init-namespaces.yaml (kubectl create namespace, then labels), the snapshot controller."""
    v = up.variables("common")
    text = up.env.from_string((up.root / "roles/common/tasks/init-namespaces.yaml").read_text().split(
        "systemNamespaces: >-", 1)[1].split("\n\n", 1)[0]).render(v, kube_node_lease={"stdout": "1"})
    names = [n for n in text.split() if n != "kube-node-lease"]
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": {
        "kubesphere.io/workspace": "system-workspace", "kubesphere.io/namespace": n}}} for n in names]
    base = "roles/common/files/snapshot-controller"
    crds = apply_step(up, [(f"{base}/crds/snapshot.storage.k8s.io_volumesnapshot.yaml",
                            (up.root / base / "crds/snapshot.storage.k8s.io_volumesnapshot.yaml").read_text())])
    values = up.template("roles/common/templates/custom-values-snapshot-controller.yaml.j2", v)
    return [Step("kubectl-create-namespace", namespaces, source="roles/common/tasks/init-namespaces.yaml"), crds,
            up.helm("snapshot-controller", base, "kube-system", [values])]


def redis(up: Upstream) -> list[Step]:
    v = up.variables("common")
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "redis-secret", "namespace": "kubesphere-system"},
              "data": {"auth": "<generated:redis-secret/auth>"}}
    text = up.template("roles/common/templates/redis.yaml.j2", v)
    return [Step("kubectl-create-secret", [secret], "kubesphere-system",
                 source="roles/common/tasks/redis-install.yaml"),
            Step("kubectl-apply", documents(text), "kubesphere-system", source="roles/common/templates/redis.yaml.j2")]


def redis_ha(up: Upstream) -> list[Step]:
    """With ``common.redis.enableHA``: the redis-ha chart as release ks-redis (roles/common/tasks/redis-install.yaml;
    the password Secret is the same as :func:`redis`'s)."""
    v = merge(up.variables("common"), {"common__redis__enableHA": True})
    values = up.template("roles/common/templates/custom-values-redis.yaml.j2", v)
    return [up.helm("ks-redis", "roles/common/files/redis-ha", "kubesphere-system", [values],
                    ("fullnameOverride=redis-ha",), source="roles/common/tasks/redis-install.yaml")]


def openldap(up: Upstream) -> list[Step]:
    v = up.variables("common")
    values = up.template("roles/common/templates/custom-values-openldap.yaml.j2", v)
    return [up.helm("ks-openldap", "roles/common/files/openldap-ha", "kubesphere-system", [values],
                    ("fullnameOverride=openldap",))]


def ks_core(up: Upstream) -> list[Step]:
    """roles/ks-core: init-token (kubectl create secret), ks-core (CRDs, helm ks-core), prepare (role templates)."""
    v = up.variables("ks-core/ks-core", "ks-core/prepare")
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "kubesphere-secret", "namespace": "kubesphere-system"},
              "data": {"token": "<generated:kubesphere-secret/token>",
                       "secret": "<generated:kubesphere-secret/secret>"}}
    base = "roles/ks-core/ks-core/files/ks-core"
    crds = [apply_step(up, [(f"{base}/crds/{p.name}", p.read_text())])
            for p in sorted((up.root / base / "crds").iterdir())]
    crd_step = Step("kubectl-apply", [o for s in crds for o in s.objects], source=f"{base}/crds/*")
    values = up.template("roles/ks-core/ks-core/templates/custom-values-ks-core.yaml.j2", v)
    chart = up.helm("ks-core", base, "kubesphere-system", [values])
    init = "roles/ks-core/prepare/files/ks-init/role-templates.yaml"
    return [Step("kubectl-create-secret", [secret], "kubesphere-system",
                 source="roles/ks-core/init-token/tasks/main.yaml"),
            crd_step, chart, apply_step(up, [(init, (up.root / init).read_text())])]


def ks_config(up: Upstream) -> list[Step]:
    v = up.variables("ks-core/config", facts={
        "ks_secret_str": {"stdout": "<generated:kubesphere-secret/secret>"},
        "ks_token_str": {"stdout": "<generated:kubesphere-secret/token>"}})
    path = "roles/ks-core/config/templates/kubesphere-config.yaml.j2"
    return [Step("kubectl-apply", documents(up.template(path, v)), source=path)]


def monitoring(up: Upstream) -> list[Step]:
    """roles/ks-monitor's prometheus-stack (default cc: no grafana, etcd, GPU, istio), notification-manager and the
    monitoring dashboards' CRDs, in the order of its tasks. The tags differ where their tasks do: v3.3.2 ships the
    PodDisruptionBudgets as plain files and has no ``prometheus/kubesphere``; its notification-manager task applies
    the chart's CRDs with kubectl only over a release of 1.0.0 (a new install: ``helm`` created them) and its chart
    has no post-install hook."""
    v = up.variables("ks-monitor")
    base, tpl = "roles/ks-monitor/files/prometheus", "roles/ks-monitor/templates"
    rendered: dict[str, dict[str, str]] = {}
    for sub, name in (("prometheus-operator", "prometheus-operator-deployment.yaml"),
                      ("prometheus", "prometheus-prometheus.yaml"),
                      ("prometheus", "prometheus-podDisruptionBudget.yaml"),
                      ("kube-state-metrics", "kube-state-metrics-deployment.yaml"),
                      ("node-exporter", "node-exporter-daemonset.yaml"),
                      ("alertmanager", "alertmanager-alertmanager.yaml"),
                      ("alertmanager", "alertmanager-podDisruptionBudget.yaml")):
        if (up.root / tpl / f"{name}.j2").exists():  # generate_manifests.yaml's list (v3.3.2: no PDB templates)
            rendered.setdefault(sub, {})[name] = up.template(f"{tpl}/{name}.j2", v)
    operator = up.files(f"{base}/prometheus-operator", rendered["prometheus-operator"])
    crds = [f for f in operator if f[0].endswith("CustomResourceDefinition.yaml")]
    steps = [apply_step(up, crds), apply_step(up, [f for f in operator if f not in crds])]
    for sub in ("node-exporter", "kube-state-metrics", "prometheus", "kubernetes", "kubesphere", "alertmanager"):
        if (up.root / base / sub).is_dir():  # prometheus/kubesphere (ks-core-monitor.yaml) is v3.4.1's
            steps.append(served(up, apply_step(up, up.files(f"{base}/{sub}", rendered.get(sub)))))
    nm = "roles/ks-monitor/files/notification-manager"
    task = (up.root / "roles/ks-monitor/tasks/notification-manager.yaml").read_text()
    if 'notification_check.stdout.find("1.0.0") != -1' in task:
        steps.append(up.chart_crds(nm))  # v3.3.2: a new install's helm created them
    else:
        steps.append(apply_step(up, up.files(f"{nm}/crds")))
    values = up.template("roles/ks-monitor/templates/custom-values-notification.yaml.j2", v)
    chart = up.helm("notification-manager", nm, "kubesphere-monitoring-system", [values])
    steps.append(chart)
    hooks = up.root / nm / "templates" / "hooks.yaml"
    if hooks.exists():
        # Its post-install hook Job (deleted on success) gave the CRDs' conversion webhook the chart's CA.
        hook = hooks.read_text()
        crds = re.findall(r"kubectl patch crd (\S+) --type=merge", hook)
        assert crds and "caBundle: ${caBundle}" in hook, "notification-manager's post-install hook changed"
        steps.append(Step("kubectl-patch", [], source=f"{nm}/templates/hooks.yaml (post-install Job)", patches=[
            {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": crd},
             "spec": {"conversion": {"webhook": {"clientConfig": {
                 "caBundle": "<generated:notification-manager/ca.crt>",
                 "service": {"namespace": "kubesphere-monitoring-system"}}}}}} for crd in crds]))
    steps.append(apply_step(up, up.files("roles/ks-monitor/files/monitoring-dashboard")))
    return steps


#: Versions a Kubernetes of today no longer serves → the one it reads the stored objects as (the same fields).
SERVED = {("policy/v1beta1", "PodDisruptionBudget"): "policy/v1", ("batch/v1beta1", "CronJob"): "batch/v1"}


def served(up: Upstream, step: Step) -> Step:
    """``step`` with its ``policy/v1beta1`` PodDisruptionBudgets (v3.3.2's Prometheus and Alertmanager files) as
    ``policy/v1`` and its ``batch/v1beta1`` CronJobs (v3.3.2's Elasticsearch curator and ks-devops 0.1.19 charts) as
    ``batch/v1`` where the cluster is Kubernetes 1.25 or later (the fixture's): it serves only those, and a cluster
    upgraded since reads the stored objects so (the same fields). Before 1.25 the step is as rendered."""
    if not up.at_least("v1.25.0"):
        return step
    old = [o for o in step.objects if (o["apiVersion"], o["kind"]) in SERVED]
    if old:
        step.objects = [{**o, "apiVersion": SERVED[o["apiVersion"], o["kind"]]} if o in old else o
                        for o in step.objects]
        kinds = sorted({f"{o['kind']} as {SERVED[o['apiVersion'], o['kind']]}" for o in old})
        step.source += f" ({', '.join(kinds)}: Kubernetes 1.25+ serves no {old[0]['apiVersion'].split('/')[0]}" \
            "/v1beta1)" if len(kinds) == 1 else f" ({', '.join(kinds)}: Kubernetes 1.25+ serves neither v1beta1)"
    return step


LOGGING = "kubesphere-logging-system"
#: What the tasks read from the cluster (``kubectl get node ... containerRuntimeVersion``, the node's address).
CLUSTER_FACTS = {"logging_container_runtime": "containerd", "builder_container_runtime": "podman",
                 "KS_JENKINS_PVC": "", "argocd_namespace": {"stdout": "argocd"},
                 "ks_jwt_secret": {"stdout": "<generated:kubesphere-secret/secret>"}}
#: The simulated cluster's first node's address (``kubectl get nodes -o jsonpath=...addresses[0].address``).
NODE_IP = "10.244.0.1"


def rendered_files(up: Upstream, role: str, names: list[str], v: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f"roles/{role}/templates/{n}.j2", up.template(f"roles/{role}/templates/{n}.j2", v)) for n in names]


def basic_auth_secret(name: str, namespace: str, username: str, password: str, kind: str = "Opaque") -> Obj:
    encode = lambda text: base64.b64encode(str(text).encode()).decode()  # noqa: E731
    return {"apiVersion": "v1", "kind": "Secret", "type": kind, "metadata": {"name": name, "namespace": namespace},
            "data": {"username": encode(username), "password": encode(password)}}


def opensearch(up: Upstream) -> list[Step]:
    """roles/common/tasks/opensearch-install.yaml: the credentials Secret, the master and data releases, the curator
    and the dashboard."""
    if store(up) == "elasticsearch":
        return elasticsearch(up)
    v = up.variables("common", facts=CLUSTER_FACTS)
    auth = v["common"]["opensearch"]["basicAuth"]
    secret = basic_auth_secret("opensearch-credentials", LOGGING, auth["username"], auth["password"],
                               "kubernetes.io/basic-auth")
    tpl, files = "roles/common/templates", "roles/common/files/opensearch"
    values = {n: up.template(f"{tpl}/custom-values-opensearch-{n}.yaml.j2", v)
              for n in ("master", "data", "curator", "dashboard")}
    steps = [Step("kubectl-create-secret", [secret], LOGGING, source="roles/common/tasks/opensearch-install.yaml"),
             up.helm("opensearch-master", f"{files}/opensearch-2.6.0.tgz", LOGGING, [values["master"]]),
             up.helm("opensearch-data", f"{files}/opensearch-2.6.0.tgz", LOGGING, [values["data"]]),
             up.helm("opensearch-logging-curator", f"{files}/opensearch-curator-1.3.3.tgz", LOGGING,
                     [values["curator"]])]
    if (v["common"]["opensearch"].get("dashboard") or {}).get("enabled"):
        steps.append(up.helm("opensearch-dashboard", f"{files}/opensearch-dashboards-2.6.0.tgz", LOGGING,
                             [values["dashboard"]]))
    return steps


def elasticsearch(up: Upstream) -> list[Step]:
    """v3.3.2's roles/common/tasks/es-install.yaml: release elasticsearch-logging (Elasticsearch 6.8 master and data
    StatefulSets) and its curator (no credentials Secret: the cc's basicAuth is off)."""
    v = up.variables("common", facts=CLUSTER_FACTS)
    assert not (v["common"]["es"].get("basicAuth") or {}).get("enabled"), "es basicAuth: its Secret is not rendered"
    tpl, files = "roles/common/templates", "roles/common/files/elasticsearch"
    return [up.helm("elasticsearch-logging", chart(up, files, "elasticsearch"), LOGGING,
                    [up.template(f"{tpl}/custom-values-elasticsearch.yaml.j2", v)]),
            served(up, up.helm("elasticsearch-logging-curator", chart(up, files, "elasticsearch-curator"), LOGGING,
                           [up.template(f"{tpl}/custom-values-elasticsearch-curator.yaml.j2", v)]))]


def fluentbit(up: Upstream) -> list[Step]:
    """roles/common/tasks/fluentbit-install.yaml: ``kubectl apply`` of the operator (init) and of Fluent Bit."""
    v = up.variables("common", facts=CLUSTER_FACTS)
    base, tpl = "roles/common/files/fluentbit-operator", "roles/common/templates"
    init = up.files(f"{base}/init", {"custom-fluentbit-operator-deployment.yaml": up.template(
        f"{tpl}/custom-fluentbit-operator-deployment.yaml.j2", v)})
    bit = up.files(f"{base}/fluentbit", {"custom-fluentbit-fluentBit.yaml": up.template(
        f"{tpl}/custom-fluentbit-fluentBit.yaml.j2", v)})
    return [apply_step(up, init), apply_step(up, bit)]


def minio(up: Upstream) -> list[Step]:
    v = up.variables("common", facts=CLUSTER_FACTS)
    values = up.template("roles/common/templates/custom-values-minio.yaml.j2", v)
    return [up.helm("ks-minio", "roles/common/files/minio-ha", "kubesphere-system", [values],
                    ("fullnameOverride=minio",))]


def store(up: Upstream) -> str:
    """The log store the tag's Outputs write to: v3.4.1's OpenSearch, v3.3.2's Elasticsearch (its only one)."""
    return "opensearch" if (up.root / "roles/common/files/opensearch").is_dir() else "elasticsearch"


def chart(up: Upstream, directory: str, name: str) -> str:
    """The tag's vendored chart ``name-<version>.tgz`` in ``directory`` (the versions differ between tags)."""
    found = sorted((up.root / directory).glob(f"{name}-[0-9]*.tgz"))
    assert len(found) == 1, f"{directory}: {name} charts {found}"
    return f"{directory}/{found[0].name}"


def fluentbit_resources(up: Upstream, role: str, module: str, v: dict[str, Any]) -> Step:
    """The Fluent Bit inputs, filters and outputs a module's tasks rendered into fluentbit-operator/ and applied."""
    names = [f"custom-output-{store(up)}-{module}.yaml", f"custom-input-{module}.yaml",
             f"custom-filter-{module}.yaml"]
    return apply_step(up, rendered_files(up, role, names, v))


def events(up: Upstream) -> list[Step]:
    """roles/ks-events: its CRDs (kubectl apply), release ks-events, its Fluent Bit resources."""
    v = up.variables("ks-events", facts=CLUSTER_FACTS)
    chart = "roles/ks-events/files/kube-events"
    values = up.template("roles/ks-events/templates/custom-values-events.yaml.j2", v)
    return [apply_step(up, up.files(f"{chart}/crds")), up.helm("ks-events", chart, LOGGING, [values]),
            fluentbit_resources(up, "ks-events", "events", v)]


def auditing(up: Upstream) -> list[Step]:
    """roles/ks-auditing: release kube-auditing (Helm creating the chart's CRDs), its Fluent Bit resources."""
    v = up.variables("ks-auditing", facts=CLUSTER_FACTS)
    chart = "roles/ks-auditing/files/kube-auditing"
    values = up.template("roles/ks-auditing/templates/custom-values.yaml.j2", v)
    return [up.chart_crds(chart), up.helm("kube-auditing", chart, LOGGING, [values]),
            fluentbit_resources(up, "ks-auditing", "auditing", v)]


def logging(up: Upstream) -> list[Step]:
    """roles/ks-logging: the Fluent Bit resources (its files, the rendered input and output, the containerd ones),
    release logsidecar-injector."""
    v = up.variables("ks-logging", facts=CLUSTER_FACTS)
    role = "roles/ks-logging"
    own = rendered_files(up, "ks-logging", [f"custom-output-{store(up)}-logging.yaml", "custom-input-logging.yaml",
                                             "custom-input-systemd.yaml"], v)
    steps = [apply_step(up, sorted(up.files(f"{role}/files/fluentbit-operator") + own)),
             apply_step(up, up.files(f"{role}/files/fluentbit-operator-cri"))]
    if v["logging"].get("logsidecar", {}).get("enabled"):
        values = up.template(f"{role}/templates/custom-values-logsidecar-injector.yaml.j2", v)
        steps.append(up.helm("logsidecar-injector", f"{role}/files/logsidecar-injector", LOGGING, [values]))
    return steps


def devops(up: Upstream) -> list[Step]:
    """roles/ks-devops: release devops of Argo CD (``--create-namespace`` argocd), the ks-devops chart's CRDs and
    s2i's (kubectl apply), release devops of ks-devops, its S2I builder templates applied again with kubectl, the
    namespaces labelled."""
    v = up.variables("ks-devops", facts=CLUSTER_FACTS)
    tpl, charts = "roles/ks-devops/templates", "roles/ks-devops/files/ks-devops/charts"
    argo = chart(up, charts, "argo-cd")
    argocd = [up.chart_crds(argo), up.helm("devops", argo, "argocd", [up.template(f"{tpl}/argo-cd-values.yaml.j2", v)])]
    values = up.template(f"{tpl}/ks-devops-values.yaml.j2", v)
    ks_devops = chart(up, charts, "ks-devops")
    crds = up.chart_crds(ks_devops)
    release = served(up, up.helm("devops", ks_devops, "kubesphere-devops-system", [values]))
    s2i = [o for o in release.objects if o["kind"] == "S2iBuilderTemplate"]
    task = (up.root / "roles/ks-devops/tasks/main.yaml").read_text()
    labelled_ns = ("kubesphere-devops-worker", "argocd") if re.search(r"\n\s+- argocd\n", task) else (
        "kubesphere-devops-worker",)  # v3.3.2 labelled only the worker namespace
    label = Step("kubectl-label-namespace", [{"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": n, "labels": {"kubesphere.io/workspace": "system-workspace"}}} for n in labelled_ns],
                 source="roles/ks-devops/tasks/main.yaml")
    return [created_namespace("argocd"), *argocd, Step("kubectl-apply", crds.objects, source=crds.source), release,
            Step("kubectl-apply", s2i, "kubesphere-devops-system", source="helm template charts/s2i -s ..."), label]


def gatekeeper(up: Upstream) -> list[Step]:
    """roles/gatekeeper: release gatekeeper (Helm creating the CRDs and the namespace), the namespace labelled."""
    v = up.variables("gatekeeper", facts=CLUSTER_FACTS)
    chart = "roles/gatekeeper/files/gatekeeper"
    values = up.template("roles/gatekeeper/templates/custom-values-gatekeeper.yaml.j2", v)
    release = up.helm("gatekeeper", chart, "gatekeeper-system", [values])
    # Its chart (3.5.2) always renders policy/v1beta1 objects: v3.4.1 installed Gatekeeper only where Kubernetes
    # still served them (before 1.25), and there the release holds them as rendered. A cluster of 1.25 or later
    # (the fixture's) does not: its release holds the PodDisruptionBudget as that cluster reads the stored object
    # now (policy/v1, the same fields) and not the PodSecurityPolicy.
    psp = [o for o in release.objects if o["kind"] == "PodSecurityPolicy"]
    old = [o for o in release.objects if o["apiVersion"] == "policy/v1beta1" and o["kind"] == "PodDisruptionBudget"]
    assert psp and old, "gatekeeper's chart no longer renders policy/v1beta1 objects"
    if up.at_least("v1.25.0"):
        release.objects = [{**o, "apiVersion": "policy/v1"} if o in old else o for o in release.objects
                           if o not in psp]
        release.source += " (PodDisruptionBudget as policy/v1, no PodSecurityPolicy: Kubernetes 1.25+ serves neither)"
    return [created_namespace("gatekeeper-system"), up.chart_crds(chart), release, labelled("gatekeeper-system")]


def created_namespace(name: str) -> Step:
    """``helm --create-namespace``: a bare namespace."""
    return Step("helm-create-namespace", [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}])


def labelled(name: str) -> Step:
    return Step("kubectl-label-namespace", [{"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "labels": {"kubesphere.io/workspace": "system-workspace"}}}])


def multicluster(up: Upstream) -> list[Step]:
    """roles/ks-multicluster: tower (kubectl apply), kubefed's CRDs (kubectl apply), release kubefed, the federated
    types (kubectl apply), the federated namespace of notifications, the patch of update_federated_crds.sh."""
    v = up.variables("ks-multicluster", facts=CLUSTER_FACTS)
    role = "roles/ks-multicluster"
    tower = rendered_files(up, "ks-multicluster", ["tower.yaml"], v)
    chart = f"{role}/files/kubefed/kubefed"
    values = up.template(f"{role}/templates/custom-values-kubefed.yaml.j2", v)
    crds = up.files(f"{chart}/charts/controllermanager/crds")
    helm_crds = up.chart_crds(chart)
    applied = {ident(o) for _, t in crds for o in documents(t)}
    helm_crds.objects = [o for o in helm_crds.objects if ident(o) not in applied]
    steps = [apply_step(up, tower, "kubesphere-system"), apply_step(up, crds), helm_crds,
             up.helm("kubefed", chart, "kube-federation-system", [values]), labelled("kube-federation-system"),
             apply_step(up, up.files(f"{role}/files/kubefed/federatedcrds"), "kube-federation-system")]
    if not (up.root / role / "files/notification").is_dir():  # v3.3.2: no federated notification namespace
        return [s for s in steps if s.objects or s.patches]
    steps.append(apply_step(up, up.files(f"{role}/files/notification")))
    script = (up.root / role / "files/notification/update_federated_crds.sh").read_text()
    patched = re.findall(r"kubectl patch crd (\S+) --type=merge", script)
    assert patched and "ks-controller-manager-webhook-cert" in script, "update_federated_crds.sh changed"
    steps.append(Step("kubectl-patch", [], source=f"{role}/files/notification/update_federated_crds.sh", patches=[
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": crd},
         "spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": "<generated:ks-core/ca.crt>"}}}}}
        for crd in patched]))
    return [s for s in steps if s.objects or s.patches]


def servicemesh(up: Upstream) -> list[Step]:
    """roles/ks-istio's releases jaeger-operator and kiali-operator (Helm creating their CRDs), the jaeger Secret
    (kubectl apply of a dry-run create) and the Jaeger and Kiali resources. Istio itself (istioctl install from the
    tag's tarballs, absent from the fetched checkout) is not rendered."""
    v = up.variables("ks-istio", facts=CLUSTER_FACTS)
    tpl, files = "roles/ks-istio/templates", "roles/ks-istio/files"
    jaeger = chart(up, f"{files}/jaeger", "jaeger-operator")
    kiali = chart(up, f"{files}/kiali", "kiali-operator")
    if store(up) == "elasticsearch":  # v3.3.2: jaeger-secret only with the Elasticsearch's basicAuth on (off here)
        assert not (v["common"]["es"].get("basicAuth") or {}).get("enabled"), "es basicAuth: jaeger-secret"
        return [up.chart_crds(jaeger),
                up.helm("jaeger-operator", jaeger, "istio-system",
                        [up.template(f"{tpl}/custom-values-jaeger.yaml.j2", v)]),
                apply_step(up, rendered_files(up, "ks-istio", ["jaeger-cr.yaml"], v), "istio-system"),
                up.chart_crds(kiali),
                up.helm("kiali-operator", kiali, "istio-system",
                        [up.template(f"{tpl}/custom-values-kiali.yaml.j2", v)]),
                apply_step(up, rendered_files(up, "ks-istio", ["kiali-cr.yaml"], v), "istio-system")]
    auth = v["common"]["opensearch"]["basicAuth"]
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "jaeger-secret", "namespace": "istio-system",
                                                                 "creationTimestamp": None},
              "data": {"ES_PASSWORD": base64.b64encode(auth["password"].encode()).decode(),
                       "ES_USERNAME": base64.b64encode(auth["username"].encode()).decode()}}
    return [up.chart_crds(jaeger),
            up.helm("jaeger-operator", jaeger, "istio-system", [up.template(f"{tpl}/custom-values-jaeger.yaml.j2", v)]),
            Step("kubectl-apply", [secret], "istio-system", source="roles/ks-istio/tasks/jaeger-install.yaml"),
            apply_step(up, rendered_files(up, "ks-istio", ["jaeger-cr.yaml"], v), "istio-system"),
            up.chart_crds(kiali),
            up.helm("kiali-operator", kiali, "istio-system", [up.template(f"{tpl}/custom-values-kiali.yaml.j2", v)]),
            apply_step(up, rendered_files(up, "ks-istio", ["kiali-cr.yaml"], v), "istio-system")]


def edgeruntime(up: Upstream) -> list[Step]:
    """roles/edgeruntime: release cloudcore (Helm creating the namespace and the CRDs) with the node's address, the
    namespace labelled."""
    v = up.variables("edgeruntime", facts=CLUSTER_FACTS)
    chart = "roles/edgeruntime/files/kubeedge/cloudcore"
    values = up.template("roles/edgeruntime/templates/custom-values-kubeedge.yaml.j2", v)
    return [created_namespace("kubeedge"), up.chart_crds(chart),
            up.helm("cloudcore", chart, "kubeedge", [values], (f"cloudCore.cloudHub.advertiseAddress[0]={NODE_IP}",)),
            labelled("kubeedge")]


#: Module → its steps, in the order upstream's installer ran them.
MODULES: dict[str, Callable[[Upstream], list[Step]]] = {
    "preinstall": preinstall, "ks-core": ks_core, "redis": redis, "openldap": openldap, "monitoring": monitoring,
    "ks-config": ks_config, "opensearch": opensearch, "fluentbit": fluentbit, "minio": minio, "events": events,
    "auditing": auditing, "logging": logging, "devops": devops, "servicemesh": servicemesh,
    "multicluster": multicluster, "edgeruntime": edgeruntime, "gatekeeper": gatekeeper,
}
#: Profile → the cc changes over upstream's default cc, and its modules (hack/v341_cluster.DEFAULT's).
PROFILES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "default": ({"common__redis__enabled": True, "common__openldap__enabled": True},
                ("preinstall", "ks-core", "redis", "openldap", "monitoring", "ks-config")),
    "pluggable": ({"common__redis__enabled": True, "common__openldap__enabled": True,
                   "common__opensearch__dashboard": {"enabled": True}, "events__enabled": True,
                   "auditing__enabled": True, "logging__enabled": True, "devops__enabled": True,
                   "gatekeeper__enabled": True, "multicluster__clusterRole": "host", "servicemesh__enabled": True,
                   "edgeruntime__enabled": True, "edgeruntime__kubeedge__enabled": True},
                  ("preinstall", "ks-core", "redis", "openldap", "opensearch", "fluentbit", "minio", "monitoring",
                   "ks-config", "events", "auditing", "logging", "devops", "servicemesh", "multicluster",
                   "edgeruntime", "gatekeeper")),
}
#: A tag's own profile where its cc differs: v3.3.2's has no ``common.opensearch`` (its log store is the
#: Elasticsearch of ``common.es``, which it always installed), so its pluggable profile has no dashboard to enable.
TAG_PROFILES: dict[tuple[str, str], tuple[dict[str, Any], tuple[str, ...]]] = {
    ("v3.3.2", "pluggable"): ({k: v for k, v in PROFILES["pluggable"][0].items() if not k.startswith(
        "common__opensearch")}, PROFILES["pluggable"][1]),
}


def render(git_dir: Path, profile: str, tag: str = "v3.4.1") -> dict[str, str]:
    """File name → text of a profile's derived files, rendered from ``tag``."""
    changes, modules = TAG_PROFILES.get((tag, profile), PROFILES[profile])
    out = fixtures_dir(tag)
    with tempfile.TemporaryDirectory(prefix=f"ks-{tag}-") as tmp:
        up = Upstream(git_dir, Path(tmp), changes, tag)
        manifest: dict[str, Any] = {"tag": tag, "commit": up.commit, "kubernetes": KUBE_VERSION,
                                    "spec_changes": changes, "cc": up.cc, "modules": {}}
        files = {}
        for module in modules:
            steps = MODULES[module](up)
            manifest["modules"][module] = [s.record() for s in steps]
            text = dump([o for s in steps for o in s.objects])
            shared = out / "default" / f"{module}.json"
            if profile != "default" and shared.exists() and shared.read_text() == text:
                manifest.setdefault("objects_from", {})[module] = "default"  # the same objects: not written twice
            else:
                files[f"{module}.json"] = text
        files["manifest.json"] = json.dumps(manifest, indent=1) + "\n"
        return files


#: The Kubernetes versions :func:`render_versions` renders v3.4.1 at: the oldest the simulated cluster runs, the first
#: that serves autoscaling/v2, the first after policy/v1beta1 went away, and the pinned one.
VERSIONS = ("v1.21.14", "v1.23.17", "v1.26.15", KUBE_VERSION)
#: Where the committed per-version facts are (tests/unit/test_version_parity.py reads them).
VERSIONS_FILE = REPO / "tests" / "parity" / "versions.json"


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """``value`` as ``path → leaf`` (``/``-separated); a ConfigMap's YAML text under ``data`` parsed first."""
    if isinstance(value, str) and path.startswith("/data/") and "\n" in value:
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, dict):
            value = parsed
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in leaves(item, f"{path}/{key}").items()} or {path: {}}
    if isinstance(value, list) and value and all(isinstance(x, dict) and "name" in x for x in value):
        return {k: v for item in value for k, v in leaves(item, f"{path}/{item['name']}").items()}
    return {path: value}


def version_objects(up: Upstream) -> dict[str, Obj]:
    """``module|Kind/namespace/name`` → object, of the pluggable profile's modules rendered at ``up.kube_version``,
    with alerting's thanos-ruler PodDisruptionBudget (ks-monitor's template, which branches on the version too)."""
    out = {}
    for module in PROFILES["pluggable"][1]:
        for step in MODULES[module](up):
            for obj in step.objects:
                out[f"{module}|{ident(obj, step.namespace)}"] = obj
    pdb = up.template("roles/ks-monitor/templates/thanos-ruler-podDisruptionBudget.yaml.j2", up.variables("ks-monitor"))
    for obj in documents(pdb):
        out[f"alerting|{ident(obj)}"] = obj
    return out


def render_versions(git_dir: Path, versions: tuple[str, ...] = VERSIONS, tag: str = "v3.4.1") -> str:
    """The JSON of ``tests/parity/versions.json``: each object of the pluggable profile that differs between
    ``versions`` (present in some only, or with another apiVersion or other values), per version: its apiVersion and
    the leaves that differ (``null`` where the version has no such object); and per version every object (apiVersion
    and ident) of Redis HA (``common.redis.enableHA``, which the profile leaves off), whose chart has a
    PodDisruptionBudget template."""
    changes = PROFILES["pluggable"][0]
    rendered: dict[str, dict[str, Obj]] = {}
    redis_ha_objects: dict[str, list[str]] = {}
    commit = ""
    for version in versions:
        with tempfile.TemporaryDirectory(prefix=f"ks-{tag}-{version}-") as tmp:
            up = Upstream(git_dir, Path(tmp), changes, tag, kube_version=version)
            rendered[version], commit = version_objects(up), up.commit
            redis_ha_objects[version] = sorted(f"{o['apiVersion']} {ident(o, s.namespace)}"
                                               for s in redis_ha(up) for o in s.objects)
    objects: dict[str, dict[str, Any]] = {}
    for key in sorted(set().union(*rendered.values())):
        found = {v: rendered[v].get(key) for v in versions}
        flat = {v: leaves({k: x for k, x in o.items() if k != "apiVersion"}) for v, o in found.items() if o}
        paths = sorted({p for f in flat.values() for p in f if len({json.dumps(g.get(p)) for g in flat.values()}) > 1})
        apis = {o["apiVersion"] for o in found.values() if o}
        if len(flat) == len(versions) and not paths and len(apis) == 1:
            continue
        objects[key] = {v: None if o is None else {"apiVersion": o["apiVersion"],
                                                   "values": {p: flat[v].get(p) for p in paths}}
                        for v, o in found.items()}
    return json.dumps({"tag": tag, "commit": commit, "profile": "pluggable", "spec_changes": changes,
                       "versions": list(versions), "objects": objects, "redis_ha": redis_ha_objects},
                      indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--git-dir", type=Path, default=Path(os.environ.get("KS_UPSTREAM_GIT_DIR", MIRROR)))
    parser.add_argument("--tag", choices=sorted(TAGS), action="append", help="the tags to render (default: all)")
    parser.add_argument("--profile", choices=sorted(PROFILES), action="append")
    parser.add_argument("--check", action="store_true", help="diff a new render against the committed files")
    parser.add_argument("--versions", action="store_true",
                        help=f"only the objects that differ by Kubernetes version ({', '.join(VERSIONS)}): "
                             f"{VERSIONS_FILE.relative_to(REPO)}")
    args = parser.parse_args(argv)
    if args.versions:
        text = render_versions(args.git_dir)
        old = VERSIONS_FILE.read_text() if VERSIONS_FILE.exists() else ""
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(VERSIONS_FILE),
                                                       f"{VERSIONS_FILE} (new render)", n=2))
        else:
            VERSIONS_FILE.write_text(text)
        print(f"[upstream-render] versions: {'same' if old == text else 'differs' if args.check else 'written'}",
              file=sys.stderr)
        return int(args.check and old != text)
    failed = 0
    for tag in args.tag or list(TAGS):
        for profile in [p for p in args.profile or sorted(PROFILES) if p in TAGS[tag]]:
            out = fixtures_dir(tag) / profile
            differs = False
            for name, text in render(args.git_dir, profile, tag).items():
                path = out / name
                if args.check:
                    old = path.read_text() if path.exists() else ""
                    if old != text:
                        differs = True
                        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                                   str(path), f"{path} (new render)", n=2))
                else:
                    out.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
            failed |= differs
            print(f"[upstream-render] {tag} {profile}: "
                  f"{'differs' if differs else 'same' if args.check else 'written'}", file=sys.stderr)
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
