"""ks_rollout: roll Deployments by a pod-template annotation (see installer.rollout)."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import TaskFailed, preview_params
from installer.kube import api_client
from installer.rollout import roll

ARGUMENT_SPEC: dict[str, Any] = {
    "namespace": {"type": "str", "required": True},
    "deployments": {"type": "list", "elements": "str", "required": True},
    "value": {"type": "str", "required": True},
    "wait": {"type": "bool", "default": True},
    "keep_unstamped": {"type": "bool", "default": False},
    "wait_timeout": {"type": "int", "default": 600},
}
SUPPORTS_CHECK_MODE = False


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        rolled, missing = roll(api_client(), p["namespace"], p["deployments"], p["value"],
                               wait=p["wait"], timeout=p["wait_timeout"],
                               keep_unstamped=p["keep_unstamped"])
    except Exception as exc:  # API errors and timeouts become a task failure with their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    return {"changed": bool(rolled), "rolled": rolled, "missing": missing}


def preview(args: dict[str, Any], api: Any, recorded: dict[str, Any] | None = None) -> list[Any]:
    """The Deployments :func:`run` would roll (``installer.manifests.Change``; offline, none): those whose pod
    template annotation changes (a missing one: nothing to roll, its creation is listed)."""
    if api is None:
        return []
    from kubernetes import client

    from installer.manifests import Change
    from installer.rollout import CONFIG_HASH, rolls

    p = preview_params(ARGUMENT_SPEC, args)
    apps = client.AppsV1Api(api)
    out = []
    for name in p["deployments"] or []:
        try:
            dep = apps.read_namespaced_deployment(name, p["namespace"])
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            continue  # missing: nothing to roll (run() reports it so)
        annotations = (dep.spec.template.metadata.annotations if dep.spec.template.metadata else None) or {}
        if rolls(annotations.get(CONFIG_HASH), str(p["value"]), p["keep_unstamped"]):
            out.append(Change(f"Deployment/{p['namespace']}/{name}", "roll",
                              note=f"pod template annotation {CONFIG_HASH} changes: its pods restart"))
    return out
