"""Action plugin ks_manifest: runs installer.ansible_tasks.ks_manifest in Ansible's worker process."""

from installer.ansible_tasks import ks_manifest
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_manifest
