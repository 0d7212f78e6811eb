"""Roll Deployments when something they read at start-up changed (a ConfigMap they mount).

The pod template gets the annotation ``installer.kubesphere.io/config-hash: <value>`` by a JSON merge patch
under its own field manager, so the module's server-side apply neither owns nor removes it. Deployments that
already carry the value are left alone; then the rollout is awaited (``installer.objects.readiness.ready``).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from installer.objects.readiness import deployment_ref, wait_ready

CONFIG_HASH = "installer.kubesphere.io/config-hash"
#: A manager of its own: the roll annotation is not in the Deployment's manifest, so the apply never prunes it.
ROLLOUT_FIELD_MANAGER = "ks-installer-rollout"


def _config_hash(dep: Any) -> str | None:
    return ((dep.spec.template.metadata or {}).get("annotations") or {}).get(CONFIG_HASH)


def rolls(stamped: str | None, value: str, keep_unstamped: bool) -> bool:
    """Whether a Deployment whose pod template carries ``stamped`` (None: no annotation) rolls to ``value``
    (:func:`roll`, and ``plan --objects``' preview of it)."""
    return stamped != value and not (stamped is None and keep_unstamped)


def roll(api: client.ApiClient, namespace: str, names: list[str], value: str, wait: bool = True,
         timeout: float = 600, keep_unstamped: bool = False) -> tuple[list[str], list[str]]:
    """Set the config-hash annotation to ``value`` on the named Deployments; return (rolled, missing).
    ``keep_unstamped``: what they read is in place as it was, so Deployments that never had the annotation (made by
    the original installer, their pods started with it) are left as they are."""
    dyn = DynamicClient(api)
    res = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    rolled, missing = [], []
    for name in names:
        try:
            dep = res.get(name=name, namespace=namespace)
        except NotFoundError:
            missing.append(name)
            continue
        if rolls(_config_hash(dep), value, keep_unstamped):
            res.patch(body={"spec": {"template": {"metadata": {"annotations": {CONFIG_HASH: value}}}}}, name=name,
                      namespace=namespace, content_type="application/merge-patch+json",
                      field_manager=ROLLOUT_FIELD_MANAGER)
            rolled.append(name)
    if wait:
        wait_ready(dyn, [deployment_ref(n, namespace) for n in names if n not in missing], timeout)
    return rolled, missing
