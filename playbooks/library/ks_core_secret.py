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


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "module": {"type": "str", "required": True},
            "namespace": {"type": "str", "required": True},
            "jwt_secret": {"type": "str", "default": "", "no_log": True},
            "admin_password": {"type": "str", "no_log": True},
        },
    )
    from installer.core_secret import ensure
    from installer.kube import api_client

    p = am.params
    try:
        outcome = ensure(api_client(), p["namespace"], p["module"], p["jwt_secret"] or "", p["admin_password"])
    except Exception as exc:  # API errors become a task failure; their text holds no secret values
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    am.exit_json(changed=outcome.changed, created=outcome.created, changed_keys=outcome.changed_keys)


if __name__ == "__main__":
    main()
