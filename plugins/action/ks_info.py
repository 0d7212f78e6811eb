"""Action plugin ks_info: runs installer.ansible_tasks.ks_info in Ansible's worker process."""

from installer.ansible_tasks import ks_info
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_info
