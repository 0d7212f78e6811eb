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


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "module": {"type": "str", "required": True},
            "namespace": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "key": {"type": "str", "required": True, "no_log": False},
            "length": {"type": "int", "default": 15},
        },
    )
    from installer.kube import api_client
    from installer.random_secret import ensure

    p = am.params
    try:
        outcome = ensure(api_client(), p["namespace"], p["name"], p["key"], p["module"], p["length"])
    except Exception as exc:  # API errors become a task failure; their text holds no secret values
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    am.exit_json(changed=outcome.changed, created=outcome.created, added_keys=outcome.added_keys)


if __name__ == "__main__":
    main()
