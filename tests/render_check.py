"""One render path: what ``plan --objects --desired`` (offline, no cluster) renders for a spec is what the modules
applied to the cluster, object for object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from installer_state import cc_with
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from installer.ansible_tasks._record import GENERATED_CA
from installer.config import prepare
from installer.engine.runner import run_variables
from installer.modules import switch_paths
from installer.objects.cluster import cluster_facts
from installer.objects.removal import KEPT_ON_UNINSTALL
from installer.preview.object_plan import GENERATED, offline_plan
from installer.preview.render import WORLD, render_modules
from installer.settings import APPLIED_ANNOTATION, MODULE_LABEL

REPO = Path(__file__).resolve().parents[1]
Ref = tuple[str, str, str, str]


def ref_of(m: dict[str, Any]) -> Ref:
    return m["apiVersion"], m["kind"], m["metadata"].get("namespace") or "", m["metadata"]["name"]


def offline_render(env: dict[str, str], tmp_path: Path, spec: dict[str, Any],
                   kubernetes_version: str) -> dict[str, list[dict[str, Any]]]:
    """Module → the manifests ``plan --objects --desired cc.yaml --kubernetes-version VERSION -o yaml`` prints for
    ``spec`` (no cluster; the objects that differ by version as at ``kubernetes_version``)."""
    cc = tmp_path / "cc.yaml"
    cc.write_text(yaml.safe_dump({**cc_with(), "spec": spec}))
    offline = {k: v for k, v in env.items() if k != "KUBECONFIG"}
    proc = subprocess.run([sys.executable, "-m", "installer", "plan", "--objects", "--offline", "--desired", str(cc),
                           "--kubernetes-version", kubernetes_version, "-o", "yaml"],
                          env=offline, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in yaml.safe_load_all(proc.stdout):
        out.setdefault(doc["metadata"]["labels"][MODULE_LABEL], []).append(doc)
    return out


def render_differences(api: client.ApiClient, env: dict[str, str], tmp_path: Path, spec: dict[str, Any],
                       state: dict[str, Any], modules: list[str], digests: bool = True) -> dict[str, list[str]]:
    """Per module, where the offline render (at the cluster's Kubernetes version) and the cluster disagree: the
    recorded inventory must hold every object the render applies and nothing it does not render (namespaces that
    exist on every cluster aside: a module labels them, it does not own them); and (``digests``) the render with the
    cluster's facts (node count: an offline render cannot know it) must make of each object the manifest whose digest
    the cluster's copy carries, but those that embed a credential the cluster generated (a JWT key, a CA bundle)."""
    problems: dict[str, list[str]] = {}
    facts = cluster_facts(api)
    rendered = offline_render(env, tmp_path, spec, facts["kubernetes_version"])

    def module_of(m: dict[str, Any]) -> str:
        return m["metadata"]["labels"][MODULE_LABEL]

    preexisting = {n["metadata"]["name"] for n in WORLD["Namespace"]}

    def own(m: dict[str, Any]) -> bool:
        """Not a namespace that exists on every cluster or that another module created (a module applies the
        namespaces it writes to; the first to create one owns it)."""
        if m["kind"] != "Namespace":
            return True
        name = m["metadata"]["name"]
        owners = {o for o, s in state.items() if not o.startswith("_")
                  and any(r[1] == "Namespace" and r[3] == name for r in s.get("inventory") or [])}
        return name not in preexisting and not owners - {module_of(m)}

    for module in modules:
        owned = [m for m in rendered.get(module, []) if own(m)]
        applied = {ref_of(m) for m in owned if APPLIED_ANNOTATION in m["metadata"].get("annotations", {})}
        inventory = {tuple(r) for r in state[module]["inventory"]}
        # Every applied object is in the inventory; so may be the Secrets the module's generators write.
        problems[module] = [f"applied, not recorded: {'/'.join(r[1:])}" for r in sorted(applied - inventory)]
        # ks_core_secret records the admin User it creates once (the render lists it as a change, not a manifest).
        generated = {("iam.kubesphere.io/v1alpha2", "User", "", "admin")}
        # What the deletion policy kept when the module stopped rendering it (a volume: grafana's after
        # monitoring.grafana went off) stays in the record, rendered or not.
        kept = {r for r in inventory if r[1] in KEPT_ON_UNINSTALL}
        problems[module] += [f"recorded, not rendered: {'/'.join(r[1:])}"
                             for r in sorted(inventory - {ref_of(m) for m in owned} - generated - kept)]
    prepared = prepare(spec, None, switch_paths())
    variables = run_variables(prepared.spec, facts)
    if not digests:
        return {m: p for m, p in problems.items() if p}
    with_facts = offline_plan(render_modules([(m, "install", "") for m in modules], variables, REPO / "roles",
                                             world=WORLD), dict.fromkeys(modules, "install"))
    dyn = DynamicClient(api)
    for planned in with_facts.modules:
        for m in planned.manifests:
            text = json.dumps(m)  # not redacted: the generated values stand in the manifest itself
            if APPLIED_ANNOTATION not in m["metadata"].get("annotations", {}) or not own(m) \
                    or GENERATED in text or GENERATED_CA in text:
                continue
            live = dyn.resources.get(api_version=m["apiVersion"], kind=m["kind"]).get(
                name=m["metadata"]["name"], namespace=m["metadata"].get("namespace"))
            if (live.metadata.annotations or {}).get(APPLIED_ANNOTATION) != m["metadata"]["annotations"][
                    APPLIED_ANNOTATION]:
                problems[planned.module].append(f"differs from the applied copy: {'/'.join(ref_of(m)[1:])}")
    return {m: p for m, p in problems.items() if p}
