#!/usr/bin/python
"""Ansible module: roll Deployments by a pod-template annotation (see installer.rollout)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_rollout
short_description: Roll Deployments by a config-hash pod-template annotation and wait for the rollout.
options:
  namespace: {description: Namespace of the Deployments., type: str, required: true}
  deployments: {description: Deployment names; missing ones are skipped and reported., type: list, elements: str}
  value:
    description: Value of the pod-template annotation installer.kubesphere.io/config-hash; Deployments already
      carrying it are not rolled.
    type: str
    required: true
  wait: {description: Wait until the rollouts are complete., type: bool, default: true}
  wait_timeout: {description: Seconds to wait., type: int, default: 600}
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "namespace": {"type": "str", "required": True},
            "deployments": {"type": "list", "elements": "str", "required": True},
            "value": {"type": "str", "required": True},
            "wait": {"type": "bool", "default": True},
            "wait_timeout": {"type": "int", "default": 600},
        },
    )
    from installer.kube import api_client
    from installer.rollout import roll

    p = am.params
    try:
        rolled, missing = roll(api_client(), p["namespace"], p["deployments"], p["value"],
                               wait=p["wait"], timeout=p["wait_timeout"])
    except Exception as exc:  # API errors and timeouts become a task failure with their text
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    am.exit_json(changed=bool(rolled), rolled=rolled, missing=missing)


if __name__ == "__main__":
    main()
