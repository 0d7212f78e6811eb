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
  apply:
    description: False - apply nothing, only prune, and wait until the pruned objects are gone with their pods
      (foreground deletion); before the apply of a workload that must never run beside the one it replaces.
    type: bool
    default: true
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

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_manifest as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
