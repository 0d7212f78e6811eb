#!/usr/bin/python
"""Ansible module: create or complete Secret kubesphere-secret and the admin User (see installer.core_secret)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_core_secret
short_description: Ensure kubesphere-secret (secret, token, initAdminPassword) and the admin User; no values returned.
options:
  module: {description: Installer module that owns the objects (label value)., type: str, required: true}
  namespace: {description: Namespace of the Secret., type: str, required: true}
  jwt_secret: {description: authentication.jwtSecret; empty keeps the current or generated key., type: str}
  admin_password:
    description: authentication.adminPassword; omitted means upstream's default password, empty a random one.
    type: str
"""

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_core_secret as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
