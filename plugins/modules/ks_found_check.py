#!/usr/bin/python
"""Ansible module: refuse objects found in the cluster that an apply would break (see ks_found_check)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_found_check
short_description: Fail, naming the object and the rule, when the cluster holds in the place of one of the objects
  a ServiceAccount token Secret of another type or account, or a webhook that calls a URL where the object names a
  Service. Read-only; no value is returned.
options:
  objects: {description: The objects the module is about to apply., type: list, elements: dict, required: true}
"""

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_found_check as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
