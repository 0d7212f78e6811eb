"""Action plugin ks_found_check: runs installer.ansible_tasks.ks_found_check in Ansible's worker process."""

from installer.ansible_tasks import ks_found_check
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_found_check
