"""ks_manifest: apply or remove a module's Kubernetes objects (see installer.objects.manifests)."""

from __future__ import annotations

import os
from typing import Any

from kubernetes.client.exceptions import ApiException

from installer.ansible_tasks import TaskFailed, argument_spec, task_plugin
from installer.objects.api_errors import Rejected, api_reason
from installer.objects.inventory import INVENTORY_ENV, read_inventory, read_recorded
from installer.objects.kube import api_client
from installer.objects.manifests import Manifests
from installer.objects.refs import load_definitions, ref_of
from installer.objects.removal import PURGE_ENV

DOCUMENTATION = r"""
module: ks_manifest
short_description: Server-side apply a set of objects for one installer module, or delete them.
options:
  module: {description: Installer module that owns the objects (label value)., type: str, required: true}
  state: {description: present applies; absent deletes., type: str, choices: [present, absent], default: present}
  definition:
    description: Objects as a list or a multi-document YAML string. With state absent, exactly these are deleted;
      without them, the module's recorded inventory (what its runs made) is, but for what the deletion policy keeps
      (PVCs, CRDs, namespaces holding PVCs or other modules' objects, objects annotated
      installer.kubesphere.io/prune=disabled). Per-object policy rides on the objects (annotations
      installer.kubesphere.io/ssa=IfNotPresent, made once; installer.kubesphere.io/prune=disabled, kept).
    type: raw
    default: []
  apply:
    description: False - apply nothing, only delete what the module's recorded inventory has and neither the
      definition nor the run so far names, and wait until it is gone with its pods (foreground deletion); before
      the apply of a workload that must never run beside the one it replaces. (Everything else the module no
      longer makes is pruned by the engine after the run succeeds.)
    type: bool
    default: true
  kinds:
    description: On absent, delete the module's labelled objects of these kinds (apiVersion/Kind) instead.
    type: list
    elements: str
    default: []
  wait:
    description: Wait for Deployments, StatefulSets and DaemonSets to be ready, Jobs complete, APIServices Available.
    type: bool
    default: false
  wait_timeout: {description: Seconds to wait., type: int, default: 600}
  purge:
    description: On absent, also delete the module's PVCs (with its StatefulSets' claims) and its CRDs no custom
      resource is left of. Default - whether the engine asked this uninstall to purge (KS_PURGE=1).
    type: bool
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = False


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        objects = load_definitions(p["definition"])
        manifests = Manifests(api_client(), p["module"])
        if p["state"] == "present" and not p["apply"]:
            # What the recorded inventory has and neither these objects nor this run so far name goes now.
            current = [ref_of(o) for o in objects] + read_inventory(os.environ.get(INVENTORY_ENV) or "")
            result = manifests.prune_inventory(read_recorded() or [], current, propagation="Foreground",
                                               timeout=p["wait_timeout"])
        elif p["state"] == "present":
            result = manifests.apply(objects)
            if p["wait"]:
                manifests.wait_ready(objects, p["wait_timeout"])
        else:
            purge = p["purge"] if p["purge"] is not None else os.environ.get(PURGE_ENV) == "1"
            result = manifests.absent(objects, read_recorded(), purge=purge, timeout=p["wait_timeout"],
                                      kinds=p["kinds"])
    except Rejected as exc:  # the API server's own reason and the object: what status and the log show
        raise TaskFailed(str(exc)) from exc
    except ApiException as exc:
        raise TaskFailed(api_reason(exc)) from exc
    except Exception as exc:  # timeouts and the rest: their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    result.record()
    return {"changed": bool(result.changed or result.deleted), "applied": result.applied,
            "updated": result.changed, "deleted": result.deleted, "kept": result.kept,
            "adopted": result.adopted, "immutable": result.immutable, "changes": result.actions}
