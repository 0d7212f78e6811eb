"""ks_rollout: roll Deployments by a pod-template annotation (see installer.objects.rollout)."""

from __future__ import annotations

from typing import Any

from installer.ansible_tasks import TaskFailed, argument_spec, preview_params, task_plugin
from installer.objects.kube import api_client
from installer.objects.rollout import roll

DOCUMENTATION = r"""
module: ks_rollout
short_description: Roll Deployments by a config-hash pod-template annotation and wait for the rollout.
options:
  namespace: {description: Namespace of the Deployments., type: str, required: true}
  deployments:
    description: Deployment names; missing ones are skipped and reported.
    type: list
    elements: str
    required: true
  value:
    description: Value of the pod-template annotation installer.kubesphere.io/config-hash; Deployments already
      carrying it are not rolled.
    type: str
    required: true
  wait: {description: Wait until the rollouts are complete., type: bool, default: true}
  keep_unstamped:
    description: What the Deployments read is in place as it was - leave those that never carried the annotation
      (made by the original installer, their pods started with it) as they are.
    type: bool
    default: false
  wait_timeout: {description: Seconds to wait., type: int, default: 600}
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
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
    """The Deployments :func:`run` would roll (``installer.objects.results.Change``; offline, none): those whose pod
    template annotation changes (a missing one: nothing to roll, its creation is listed)."""
    if api is None:
        return []
    from kubernetes import client

    from installer.objects.results import Change
    from installer.objects.rollout import CONFIG_HASH, rolls

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


def render(params: dict[str, Any], host: str, waits: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """In a render: nothing rolled."""
    return {"rolled": [], "missing": []}, None
