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

from installer.ansible_tasks import ks_rollout as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
