"""ks_found_check: before a module applies ``objects``, refuse what the cluster holds in their place that an apply
would break or could only delete: a ServiceAccount token Secret of another type or account (a type cannot change, so
its data would be lost), a webhook that calls a URL where the module registers a Service (the API wants one of them,
an apply cannot swap them). Read-only; each message names the object and the rule, never a value."""

from __future__ import annotations

from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from installer.ansible_tasks import TaskFailed, argument_spec, task_plugin
from installer.objects.credentials import (
    SA_ANNOTATION,
    SA_TOKEN,
    Refused,
    service_account_token_problem,
    webhook_url_problems,
)
from installer.objects.kube import api_client

DOCUMENTATION = r"""
module: ks_found_check
short_description: Fail, naming the object and the rule, when the cluster holds in the place of one of the objects
  a ServiceAccount token Secret of another type or account, or a webhook that calls a URL where the object names a
  Service. Read-only; no value is returned.
options:
  objects: {description: The objects the module is about to apply., type: list, elements: dict, required: true}
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = True
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def problems(live: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """What keeps ``obj`` from being applied over ``live`` (the object of that name in the cluster)."""
    meta = obj.get("metadata") or {}
    if obj.get("kind") == "Secret" and obj.get("type") == SA_TOKEN:
        account = (meta.get("annotations") or {}).get(SA_ANNOTATION, "")
        rule = service_account_token_problem(live.get("type"), (live.get("metadata") or {}).get("annotations"),
                                             account)
        if rule:
            return [str(Refused(meta.get("namespace", ""), meta.get("name", ""), rule,
                                "it was left as it is: save its data, delete it, and the installer creates the "
                                "token again"))]
    if obj.get("kind") in WEBHOOK_KINDS:
        return webhook_url_problems(live, obj)
    return []


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        found = [problem for obj, live in _found(p["objects"]) for problem in problems(live, obj)]
    except Exception as exc:  # API errors become a task failure; a read error holds no value
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    if found:
        raise TaskFailed("; ".join(found))
    return {"changed": False}


def _found(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The Secrets and webhook configurations of ``objects`` that the cluster holds, each with the live one."""
    checked = [o for o in objects if o.get("kind") in (*WEBHOOK_KINDS, "Secret")]
    if not checked:
        return []
    dyn = DynamicClient(api_client())
    out = []
    for obj in checked:
        meta = obj.get("metadata") or {}
        try:
            live = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).get(
                name=meta["name"], namespace=meta.get("namespace")).to_dict()
        except NotFoundError:
            continue
        out.append((obj, live))
    return out
