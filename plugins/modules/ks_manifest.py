#!/usr/bin/python
"""Ansible module: apply or remove a module's Kubernetes objects (see installer.manifests)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_manifest
short_description: Server-side apply a set of objects for one installer module, or delete them.
options:
  module: {description: Installer module that owns the objects (label value)., type: str, required: true}
  state: {description: present applies; absent deletes., type: str, default: present}
  definition:
    description: Objects as a list or a multi-document YAML string. With state absent, exactly these are deleted;
      without them, the module's recorded inventory (what its runs made) is.
    type: raw
    default: []
  apply:
    description: False - apply nothing, only delete what the module's recorded inventory has and neither the
      definition nor the run so far names, and wait until it is gone with its pods (foreground deletion); before
      the apply of a workload that must never run beside the one it replaces. (Everything else the module no
      longer makes is pruned by the engine after the run succeeds.)
    type: bool
    default: true
  create_only:
    description: Apply only the objects that do not exist; leave the others as they are (changes made to them
      since stay). Those that carry the module's label stay in its run's inventory, so no prune deletes them.
    type: bool
    default: false
  kinds:
    description: On absent, delete the module's labelled objects of these kinds (apiVersion/Kind) instead.
    type: list
    elements: str
    default: []
  keep:
    description: On absent without definition or kinds, objects (Kind/namespace/name, or a Kind) the uninstall
      keeps; a purge deletes those that are PersistentVolumeClaims or Secrets.
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
