#!/usr/bin/python
"""Ansible module: read Kubernetes objects (one by name, or a list by namespace and label selector)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_info
short_description: Get objects of one kind; a missing object or an unserved kind gives an empty list.
options:
  api_version: {description: apiVersion of the kind., type: str, default: v1}
  kind: {description: Kind to read., type: str, required: true}
  name: {description: Object name; omit to list., type: str}
  namespace: {description: Namespace; omit for cluster-scoped kinds or all namespaces., type: str}
  label_selector: {description: Label selector when listing., type: str}
  keys_only:
    description: Return only the keys of each object's data (values blanked), e.g. to check a Secret's keys
      without its values reaching a result or job event.
    type: bool
    default: false
"""

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_info as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
