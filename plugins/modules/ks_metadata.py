#!/usr/bin/python
"""Ansible module: own a few labels or annotations on objects the installer does not own (namespaces, nodes,
built-in ClusterRoles)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_metadata
short_description: Server-side apply only metadata.labels and metadata.annotations of existing objects.
description:
  - For several objects of one kind in one call, without the module label. An object is never created, adopted,
    pruned or deleted; missing ones (or ones being deleted) are reported (missing), not an error. Absent gives
    the labels and annotations back (the field manager stops owning them, so the API server removes those no other
    manager owns, e.g. one that `kubectl label` set before).
options:
  api_version: {description: apiVersion of the objects., type: str, default: v1}
  kind: {description: Kind of the objects., type: str, default: Namespace}
  names: {description: Names of the objects., type: list, elements: str, required: true}
  namespace: {description: Namespace of the objects; omit for cluster-scoped kinds., type: str}
  labels: {description: Labels to own., type: dict, default: {}}
  annotations: {description: Annotations to own., type: dict, default: {}}
  field_manager: {description: Field manager that owns them (one per use, kept across versions)., type: str,
                  required: true}
  state: {description: present sets them; absent removes them., type: str, default: present}
"""

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_metadata as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
