"""The objects that differ by Kubernetes version, as the installer renders them and as ks-installer v3.4.1 did.

``tests/parity/versions.json`` (``hack/upstream_render.py --versions``) holds, for v1.21.14, v1.23.17, v1.26.15 and
v1.34.4, each object of upstream's pluggable profile that differs between them, per version: absent, or its
apiVersion and the values that differ. Here every module renders (no cluster: the offline world of ``plan
--objects``) with that profile's cc at each version, its ``kubernetes_version`` being the version (what the engine
reads from the API server); each listed object must be there exactly where upstream's is, with upstream's apiVersion
and values, and no other object may differ between the versions except those in :data:`OWN`. Redis HA (off in the
profile) renders at each version the objects upstream's redis-ha chart rendered there (``redis_ha``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from upstream_render import leaves

from installer.config.defaults import apply_defaults
from installer.engine.plays import play_variables, plays_of
from installer.engine.runner import run_variables
from installer.modules import MODULES, Module
from installer.preview import render

REPO = Path(__file__).resolve().parents[2]
FACTS: dict[str, Any] = json.loads((REPO / "tests" / "parity" / "versions.json").read_text())
VERSIONS: list[str] = FACTS["versions"]
UPSTREAM: dict[str, dict[str, Any]] = FACTS["objects"]
#: Objects that differ by version here beyond upstream's list, with upstream's branch for each.
OWN: dict[str, str] = {
    "gatekeeper|ClusterRole/gatekeeper-manager-role":
        "the rule to `use` PodSecurityPolicy gatekeeper-admin only where that policy exists (before 1.25); upstream's "
        "chart kept it on every version (the parity content lists it from 1.25 on)",
    "servicemesh|HorizontalPodAutoscaler/istio-system/istiod-1-14-6":
        "Istio 1.14.6's istio-discovery chart (autoscale.yaml: autoscaling/v2 from 1.23, else autoscaling/v2beta2; "
        "`istioctl install` renders it with the cluster's version), which upstream installed from a tarball outside "
        "its repository (not in versions.json)",
}
ISTIOD_HPA = {"v1.21.14": "autoscaling/v2beta2", "v1.23.17": "autoscaling/v2", "v1.26.15": "autoscaling/v2",
              "v1.34.4": "autoscaling/v2"}
PSP_RULE = {"apiGroups": ["policy"], "resourceNames": ["gatekeeper-admin"], "resources": ["podsecuritypolicies"],
            "verbs": ["use"]}


def cc_spec(**extra: Any) -> dict[str, Any]:
    """Upstream's pluggable profile as a cc spec (its ``a__b`` changes over the default cc), alerting on too, and
    ``extra`` (``a__b`` changes)."""
    changes: dict[str, Any] = {"alerting": {"enabled": True}}
    for path, value in {**FACTS["spec_changes"], **extra}.items():
        node = changes
        *parents, leaf = path.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return apply_defaults(changes)


def key(module: str, obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{module}|{obj['kind']}/{ns}/{meta['name']}" if ns else f"{module}|{obj['kind']}/{meta['name']}"


def render_versions(spec: dict[str, Any], modules: list[Module], work: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Version → ``module|Kind/namespace/name`` → object: ``modules`` rendered with ``spec`` at every version, in one
    playbook (one Ansible host per module and version, the version a host variable)."""
    facts = {k: v for k, v in render.OFFLINE_FACTS.items() if k != "kubernetes_version"}
    variables = run_variables(spec, facts)
    hosts = {f"{m.name}@{v}": render.Host(plays_of(m, False, None), {
        **play_variables(m), "ks_action": "install", "ks_hash": "", "kubernetes_version": v})
        for v in VERSIONS for m in modules}
    captured = render.run_hosts(hosts, work, REPO / "roles", extravars=variables, world=render.WORLD)
    out: dict[str, dict[str, dict[str, Any]]] = {v: {} for v in VERSIONS}
    for host, calls in captured.items():
        module, version = host.split("@")
        result = render.Rendered(module, "install", calls)
        assert result.failure is None, (host, result.failure)
        out[version] |= {key(module, o): o for o in result.objects()}
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    """Every module of the profile at every version."""
    return render_versions(cc_spec(), list(MODULES), tmp_path_factory.mktemp("versions"))


def test_version_dependent_objects_follow_upstream(rendered: dict[str, dict[str, dict[str, Any]]]) -> None:
    for version in VERSIONS:
        compared = []
        for ref, per_version in UPSTREAM.items():
            expected, ours = per_version[version], rendered[version].get(ref)
            if expected is None:
                assert ours is None, f"{version}: {ref} is rendered; upstream made none there"
                compared.append(f"{ref}: absent")
                continue
            assert ours is not None, f"{version}: {ref} is not rendered; upstream made it ({expected['apiVersion']})"
            assert ours["apiVersion"] == expected["apiVersion"], (version, ref)
            flat = leaves({k: v for k, v in ours.items() if k != "apiVersion"})
            assert {p: flat.get(p) for p in expected["values"]} == expected["values"], (version, ref)
            values = "".join(f", {p}={v}" for p, v in expected["values"].items())
            compared.append(f"{ref}: {ours['apiVersion']}{values}")
        print(f"[{version}] compared with v3.4.1's render: " + "; ".join(compared))


def test_nothing_else_differs_by_version(rendered: dict[str, dict[str, dict[str, Any]]]) -> None:
    refs = set().union(*(set(objects) for objects in rendered.values()))
    differing = {ref for ref in refs if len({json.dumps(rendered[v].get(ref), sort_keys=True) for v in VERSIONS}) > 1}
    assert differing == set(UPSTREAM) | set(OWN)
    print(f"objects that differ by version ({len(differing)} of {len(refs)} per version at most): "
          + ", ".join(sorted(differing)))


def test_own_branches(rendered: dict[str, dict[str, dict[str, Any]]]) -> None:
    for version in VERSIONS:
        hpa = rendered[version]["servicemesh|HorizontalPodAutoscaler/istio-system/istiod-1-14-6"]
        assert hpa["apiVersion"] == ISTIOD_HPA[version], version
        assert hpa["spec"]["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 80}
        rules = rendered[version]["gatekeeper|ClusterRole/gatekeeper-manager-role"]["rules"]
        has_psp = rendered[version].get("gatekeeper|PodSecurityPolicy/gatekeeper-admin") is not None
        assert (PSP_RULE in rules) == has_psp, version
        print(f"[{version}] istiod HPA {hpa['apiVersion']}; gatekeeper-manager-role "
              f"{'with' if has_psp else 'without'} the rule to use PodSecurityPolicy gatekeeper-admin")


def test_redis_ha_follows_upstreams_chart(tmp_path: Path) -> None:
    """Redis HA (``common.redis.enableHA``) renders the objects upstream's redis-ha chart rendered at each version:
    the chart's PodDisruptionBudget template (``policy/v1beta1``) renders nothing with upstream's values
    (``podDisruptionBudget: {}``), so there is none at any version."""
    redis = next(m for m in MODULES if m.name == "redis")
    rendered = render_versions(cc_spec(common__redis__enableHA=True), [redis], tmp_path)
    for version in VERSIONS:
        ours = sorted(f"{o['apiVersion']} {ref.split('|', 1)[1]}" for ref, o in rendered[version].items())
        assert ours == FACTS["redis_ha"][version], version
        assert not [o for o in ours if " PodDisruptionBudget/" in o]
        print(f"[{version}] Redis HA compared with v3.4.1's redis-ha chart: {len(ours)} objects, the same; "
              "no PodDisruptionBudget")
