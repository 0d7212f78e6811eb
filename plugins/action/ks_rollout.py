"""Action plugin ks_rollout: runs installer.ansible_tasks.ks_rollout in Ansible's worker process."""

from installer.ansible_tasks import ks_rollout
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_rollout
