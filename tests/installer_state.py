"""The default cc, variations of it, and a clean slate for the installer on the test cluster."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.settings import CC_GROUP, CC_NAME, CC_PLURAL, CC_VERSION, LEASE_NAME, NAMESPACE, STATE_SECRET

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CC: dict[str, Any] = yaml.safe_load((REPO / "deploy" / "cluster-configuration.yaml").read_text())


def cc_with(**changes: Any) -> dict[str, Any]:
    """The default cc with ``a__b=value`` spec changes (``etcd__monitoring=True``)."""
    cc = copy.deepcopy(DEFAULT_CC)
    for path, value in changes.items():
        node = cc["spec"]
        *parents, leaf = path.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return cc


def forget_installer(api: client.ApiClient) -> None:
    """Delete the cc, the installer's state Secret and its Lease (what it installed stays)."""
    core = client.CoreV1Api(api)
    for call in (
        lambda: client.CustomObjectsApi(api).delete_namespaced_custom_object(CC_GROUP, CC_VERSION, NAMESPACE,
                                                                             CC_PLURAL, CC_NAME),
        lambda: core.delete_namespaced_secret(STATE_SECRET, NAMESPACE),
        lambda: client.CoordinationV1Api(api).delete_namespaced_lease(LEASE_NAME, NAMESPACE),
    ):
        try:
            call()
        except ApiException as exc:
            if exc.status != 404:
                raise


def upstream_objects(module: str) -> set[tuple[str, str, str]]:
    """(kind, namespace or "", name) of what ks-installer v3.4.1 created for ``module`` (tests/parity/upstream),
    without the objects whose names upstream generated at random."""
    data = json.loads((REPO / "tests" / "parity" / "upstream" / f"{module}.json").read_text())
    return {(o["kind"], o["namespace"] or "", o["name"]) for o in data["objects"] if not o.get("name_is_random")}


def upstream_kinds(module: str) -> dict[str, int]:
    """Objects per kind that ks-installer v3.4.1 created for ``module`` (tests/parity/upstream)."""
    data = json.loads((REPO / "tests" / "parity" / "upstream" / f"{module}.json").read_text())
    return dict(Counter(o["kind"] for o in data["objects"]))


def kube_at_least(api: client.ApiClient, major: int, minor: int) -> bool:
    """Whether the cluster's Kubernetes (its API server's ``gitVersion``) is ``major.minor`` or later."""
    found = client.VersionApi(api).get_code().git_version.lstrip("v").split(".")
    return (int(found[0]), int(found[1])) >= (major, minor)
