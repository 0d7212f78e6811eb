"""Action plugin ks_core_secret: runs installer.ansible_tasks.ks_core_secret in Ansible's worker process."""

from installer.ansible_tasks import ks_core_secret
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_core_secret
