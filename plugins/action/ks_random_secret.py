"""Action plugin ks_random_secret: runs installer.ansible_tasks.ks_random_secret in Ansible's worker process."""

from installer.ansible_tasks import ks_random_secret
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_random_secret
