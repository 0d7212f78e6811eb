#!/usr/bin/python
"""Ansible module: ensure a Secret holds a key, generating a random value only if missing (installer.random_secret)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_random_secret
short_description: Ensure Secret <name> has key <key>; a random value is generated only when it is missing and
  never replaced; no value is returned.
options:
  module: {description: Installer module that owns the Secret (label value)., type: str, required: true}
  namespace: {description: Namespace of the Secret., type: str, required: true}
  name: {description: Name of the Secret., type: str, required: true}
  key: {description: Data key that must hold the generated value., type: str, required: true}
  length: {description: Length of a generated value (ASCII letters)., type: int, default: 15}
"""

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_random_secret as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
