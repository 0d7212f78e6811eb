"""Render what ks-installer v3.4.1 made, from upstream's own files, into tests/parity/upstream-v341 (derived output).

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
they were applied) and ``manifest.json`` (per module, each step: how it was applied — ``kubectl-create-namespace``,
``kubectl-create-secret``, ``kubectl-apply`` with its ``-n``, ``helm`` with release, namespace, chart and version —
and the objects it holds, ``Kind/namespace/name``). What upstream generated at install time is a placeholder
``<generated:NAME>`` that the fixture (hack/upstream_fixture.py) fills at apply time: the JWT key and token, redis'
password, each chart's generated CA / serving certificate / key (``<generated:RELEASE/ca.crt>`` ...), each chart's
random strings. Helm hooks deleted on success are listed in the step (``hooks_deleted``), not kept.

    hack/upstream_render.py                 render and write the committed files
    hack/upstream_render.py --check         render and diff against the committed files (exit 1 on a difference)
"""

from __future__ import annotations

import argparse
import base64
import copy
import difflib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import yaml
from upstream_fixture import CLUSTER_KINDS, Step, ident

REPO = Path(__file__).resolve().parents[1]
TAG = "v3.4.1"
OUT = REPO / "tests" / "parity" / "upstream-v341"
MIRROR = Path("/work/.mirror/kubesphere+ks-installer/repo")
KUBE_VERSION = "v1.34.4"
#: What a real cluster with the monitoring module's CRDs advertises (charts check some with .Capabilities).
API_VERSIONS = ("monitoring.coreos.com/v1", "batch/v1/CronJob", "policy/v1/PodDisruptionBudget",
                "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1")
#: The roles (and other paths) unpacked from the tag (the whole tree does not unpack: two istio tarballs are absent).
PATHS = ("roles/kubesphere-defaults", "roles/download", "roles/common", "roles/ks-core", "roles/ks-monitor",
         "roles/preinstall", "deploy/cluster-configuration.yaml")
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
    for doc in yaml.load_all(text, Loader=Loader):  # a SafeLoader
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

    def __init__(self, git_dir: Path, root: Path, spec_changes: dict[str, Any]) -> None:
        self.git_dir, self.root = git_dir, root
        proc = subprocess.run(["git", f"--git-dir={git_dir}", "archive", TAG, *PATHS], capture_output=True,
                              check=True, timeout=300)
        with tarfile.open(fileobj=__import__("io").BytesIO(proc.stdout)) as tar:
            tar.extractall(root, filter="data")
        self.commit = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", f"{TAG}^{{commit}}"],
                                     capture_output=True, text=True, check=True).stdout.strip()
        self.env = environment()
        cc = yaml.safe_load((root / "deploy" / "cluster-configuration.yaml").read_text())
        self.spec = merge(cc["spec"], spec_changes)
        self.cluster_kinds = set(CLUSTER_KINDS)
        for path in root.rglob("*.yaml"):
            text = path.read_text(errors="replace")
            if "CustomResourceDefinition" not in text:
                continue
            try:
                for doc in yaml.safe_load_all(text):
                    if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition" and \
                            doc.get("spec", {}).get("scope") == "Cluster":
                        self.cluster_kinds.add(doc["spec"]["names"]["kind"])
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
        out |= {"kubernetes_version": KUBE_VERSION, "kube_version": KUBE_VERSION, "enableHA": False,
                "master_num": "1", "status": {}, "nodeNum": 1, "container_runtime": "containerd",
                **(facts or {})}
        out |= copy.deepcopy(self.spec)
        out = resolved(out, self.env)
        tags = out.get("ks_kubectl_versions") or {}
        for minimum, tag in tags.items():  # the first entry the cluster's version reaches (tasks' loop)
            if self.env.from_string("{{ v is version(m, '>=') }}").render(v=KUBE_VERSION, m=minimum) == "True":
                out.setdefault("ks_kubectl_tag", tag)
                break
        return resolved(out, self.env)

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
             source: str = "") -> Step:
        """``helm upgrade --install`` as ``helm template``: objects without the chart's CRDs (upstream applied
        them with kubectl first, so Helm skipped them), hooks deleted on success left out, generated values
        replaced by placeholders (found by rendering twice)."""
        with tempfile.TemporaryDirectory() as tmp:
            chart_dir = self.root / chart
            if chart.endswith(".tgz"):
                with tarfile.open(chart_dir) as tar:
                    tar.extractall(tmp, filter="data")
                chart_dir = next(Path(tmp).iterdir())
            files = []
            for i, text in enumerate(values):
                path = Path(tmp) / f"values-{i}.yaml"
                path.write_text(text)
                files += ["-f", str(path)]
            meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
            args = [str(helm_binary()), "template", release, str(chart_dir), "--namespace", namespace, *files,
                    "--kube-version", KUBE_VERSION, *[f"--api-versions={v}" for v in API_VERSIONS],
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
                    hooks.append(ident(first, namespace))
                    continue
            objects.append(first if first == second else placeholders(first, second, release, cert))
        # An object the chart renders twice (notification-manager: its Secret with a fixed key pair in tls.yaml,
        # then the generated one in validating.yaml): the install's concurrent creates fail on the second and the
        # task's retry (``helm upgrade --install --force``) applies them in order, so the last one stays.
        keys = [ident(o, namespace) for o in objects]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        objects = [o for i, o in enumerate(objects) if keys[i] not in keys[i + 1:]]
        return Step("helm", objects, namespace, release, meta["name"], str(meta["version"]), source or chart,
                    hooks_deleted=hooks, certificate=cert, duplicates=duplicates)


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
    monitoring dashboards' CRDs, in the order of its tasks."""
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
        rendered.setdefault(sub, {})[name] = up.template(f"{tpl}/{name}.j2", v)
    operator = up.files(f"{base}/prometheus-operator", rendered["prometheus-operator"])
    crds = [f for f in operator if f[0].endswith("CustomResourceDefinition.yaml")]
    steps = [apply_step(up, crds), apply_step(up, [f for f in operator if f not in crds])]
    for sub in ("node-exporter", "kube-state-metrics", "prometheus", "kubernetes", "kubesphere", "alertmanager"):
        steps.append(apply_step(up, up.files(f"{base}/{sub}", rendered.get(sub))))
    nm = "roles/ks-monitor/files/notification-manager"
    steps.append(apply_step(up, up.files(f"{nm}/crds")))
    values = up.template("roles/ks-monitor/templates/custom-values-notification.yaml.j2", v)
    chart = up.helm("notification-manager", nm, "kubesphere-monitoring-system", [values])
    steps.append(chart)
    # Its post-install hook Job (deleted on success) gave the CRDs' conversion webhook the chart's CA.
    hook = (up.root / nm / "templates" / "hooks.yaml").read_text()
    crds = re.findall(r"kubectl patch crd (\S+) --type=merge", hook)
    assert crds and "caBundle: ${caBundle}" in hook, "notification-manager's post-install hook changed"
    steps.append(Step("kubectl-patch", [], source=f"{nm}/templates/hooks.yaml (post-install Job)", patches=[
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": crd},
         "spec": {"conversion": {"webhook": {"clientConfig": {
             "caBundle": "<generated:notification-manager/ca.crt>",
             "service": {"namespace": "kubesphere-monitoring-system"}}}}}} for crd in crds]))
    steps.append(apply_step(up, up.files("roles/ks-monitor/files/monitoring-dashboard")))
    return steps


#: Module → its steps, in the order upstream's installer ran them.
MODULES: dict[str, Callable[[Upstream], list[Step]]] = {
    "preinstall": preinstall, "ks-core": ks_core, "redis": redis, "openldap": openldap, "monitoring": monitoring,
    "ks-config": ks_config,
}
#: Profile → the cc changes over upstream's default cc, and its modules (hack/v341_cluster.DEFAULT's).
PROFILES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "default": ({"common__redis__enabled": True, "common__openldap__enabled": True},
                ("preinstall", "ks-core", "redis", "openldap", "monitoring", "ks-config")),
}


def render(git_dir: Path, profile: str) -> dict[str, str]:
    """File name → text of a profile's derived files."""
    changes, modules = PROFILES[profile]
    with tempfile.TemporaryDirectory(prefix="ks-v341-") as tmp:
        up = Upstream(git_dir, Path(tmp), changes)
        manifest: dict[str, Any] = {"tag": TAG, "commit": up.commit, "kubernetes": KUBE_VERSION,
                                    "spec_changes": changes, "modules": {}}
        files = {}
        for module in modules:
            steps = MODULES[module](up)
            manifest["modules"][module] = [s.record() for s in steps]
            files[f"{module}.json"] = dump([o for s in steps for o in s.objects])
        files["manifest.json"] = json.dumps(manifest, indent=1) + "\n"
        return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--git-dir", type=Path, default=Path(os.environ.get("KS_UPSTREAM_GIT_DIR", MIRROR)))
    parser.add_argument("--profile", choices=sorted(PROFILES), action="append")
    parser.add_argument("--check", action="store_true", help="diff a new render against the committed files")
    args = parser.parse_args(argv)
    failed = 0
    for profile in args.profile or sorted(PROFILES):
        out = OUT / profile
        for name, text in render(args.git_dir, profile).items():
            path = out / name
            if args.check:
                old = path.read_text() if path.exists() else ""
                if old != text:
                    failed = 1
                    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                               str(path), f"{path} (new render)", n=2))
            else:
                out.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        print(f"[upstream-render] {profile}: {'differs' if failed else 'same' if args.check else 'written'}",
              file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main())
