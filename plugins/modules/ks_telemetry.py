#!/usr/bin/python
"""Ansible module: the cluster's id in the cc status, and upstream's anonymous usage report."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_telemetry
short_description: Ensure status.clusterId on the cc, then send the usage report (a GET with query parameters).
description:
  - The id (<uuid>-<epoch>, as upstream) is created once and kept. The report carries what upstream's telemetry
    role sent: Kubernetes and KubeSphere versions, control-plane and node counts, the creation times of kube-system
    and kubesphere-system, the first node's OS image and machine id, the status keys and the cluster role.
  - A failed send is reported (sent false, its reason), never a task failure, as upstream ignored it.
options:
  url: {description: Where the report goes., type: str, required: true}
  cluster_role: {description: multicluster.clusterRole., type: str, default: none}
  timeout: {description: Seconds for the request., type: int, default: 10}
"""

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_telemetry as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
