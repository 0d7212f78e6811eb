"""Action plugin ks_metadata: runs installer.ansible_tasks.ks_metadata in Ansible's worker process."""

from installer.ansible_tasks import ks_metadata
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_metadata
