#!/usr/bin/python
"""Ansible module: apply or remove a module's Kubernetes objects (see installer.manifests)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_manifest
short_description: Server-side apply a set of objects for one installer module, with prune; or delete them.
options:
  module: {description: Installer module that owns the objects (label value)., type: str, required: true}
  state: {description: present applies (and prunes); absent deletes., type: str, default: present}
  definition: {description: Objects as a list or a multi-document YAML string., type: raw, default: []}
  prune: {description: Delete owned objects of the same kinds that are no longer rendered., type: bool}
  kinds:
    description: More kinds (apiVersion/Kind) that prune (present) or delete (absent) looks at, whether or not
      the definition has objects of them.
    type: list
    elements: str
    default: []
  wait:
    description: Wait for Deployments, StatefulSets and DaemonSets to be ready, Jobs complete, APIServices Available.
    type: bool
  wait_timeout: {description: Seconds to wait., type: int, default: 600}
  tenants:
    description: On absent, more kinds (apiVersion/Kind) whose objects of another module keep a namespace of
      this module from being deleted (besides installer.manifests.TENANT_KINDS).
    type: list
    elements: str
    default: []
  purge:
    description: On absent, also delete the module's PVCs (with its StatefulSets' claims) and its CRDs no custom
      resource is left of. Default - whether the engine asked this uninstall to purge (KS_PURGE=1).
    type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "module": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "definition": {"type": "raw", "default": []},
            "prune": {"type": "bool", "default": True},
            "wait": {"type": "bool", "default": False},
            "wait_timeout": {"type": "int", "default": 600},
            "purge": {"type": "bool", "default": None},
            "kinds": {"type": "list", "elements": "str", "default": []},
            "tenants": {"type": "list", "elements": "str", "default": []},
        },
    )
    from kubernetes.client.exceptions import ApiException

    from installer.kube import api_client
    from installer.manifests import PURGE_ENV, Manifests, Rejected, api_reason, load_definitions

    p = am.params
    try:
        objects = load_definitions(p["definition"])
        manifests = Manifests(api_client(), p["module"])
        if p["state"] == "present":
            result = manifests.apply(objects, prune=p["prune"], kinds=p["kinds"])
            if p["wait"]:
                manifests.wait_ready(objects, p["wait_timeout"])
        else:
            purge = p["purge"] if p["purge"] is not None else os.environ.get(PURGE_ENV) == "1"
            result = manifests.delete(objects, purge=purge, timeout=p["wait_timeout"], kinds=p["kinds"],
                                      tenants=p["tenants"])
    except Rejected as exc:  # the API server's own reason and the object: what status and the log show
        am.fail_json(msg=str(exc))
    except ApiException as exc:
        am.fail_json(msg=api_reason(exc))
    except Exception as exc:  # timeouts and the rest: their text
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    result.record()
    am.exit_json(changed=bool(result.changed or result.deleted), applied=result.applied,
                 updated=result.changed, deleted=result.deleted, kept=result.kept)


if __name__ == "__main__":
    main()
