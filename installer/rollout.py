"""Roll Deployments when something they read at start-up changed (a ConfigMap they mount).

The pod template gets the annotation ``installer.kubesphere.io/config-hash: <value>`` by a JSON merge patch
under its own field manager, so the module's server-side apply neither owns nor removes it. Deployments that
already carry the value are left alone; then the rollout is awaited like ``kubectl rollout status``.
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

CONFIG_HASH = "installer.kubesphere.io/config-hash"
FIELD_MANAGER = "ks-installer-rollout"


def _config_hash(dep: Any) -> str | None:
    return ((dep.spec.template.metadata or {}).get("annotations") or {}).get(CONFIG_HASH)


def rolled_out(dep: Any) -> bool:
    """``kubectl rollout status``: the newest generation observed, every replica updated and available,
    no old replica left."""
    status, wanted = dep.status or {}, dep.spec.get("replicas", 1)
    return ((status.get("observedGeneration") or 0) >= dep.metadata.generation
            and (status.get("updatedReplicas") or 0) >= wanted
            and (status.get("replicas") or 0) <= (status.get("updatedReplicas") or 0)
            and (status.get("availableReplicas") or 0) >= wanted)


def roll(api: client.ApiClient, namespace: str, names: list[str], value: str, wait: bool = True,
         timeout: float = 600) -> tuple[list[str], list[str]]:
    """Set the config-hash annotation to ``value`` on the named Deployments; return (rolled, missing)."""
    res = DynamicClient(api).resources.get(api_version="apps/v1", kind="Deployment")
    rolled, missing = [], []
    for name in names:
        try:
            dep = res.get(name=name, namespace=namespace)
        except NotFoundError:
            missing.append(name)
            continue
        if _config_hash(dep) != value:
            res.patch(body={"spec": {"template": {"metadata": {"annotations": {CONFIG_HASH: value}}}}}, name=name,
                      namespace=namespace, content_type="application/merge-patch+json", field_manager=FIELD_MANAGER)
            rolled.append(name)
    if wait:
        deadline = time.monotonic() + timeout
        pending = [n for n in names if n not in missing]
        while pending:
            pending = [n for n in pending if not rolled_out(res.get(name=n, namespace=namespace))]
            if pending and time.monotonic() > deadline:
                raise TimeoutError(f"rollout of {', '.join(pending)} not complete after {int(timeout)}s")
            if pending:
                time.sleep(2)
    return rolled, missing
