"""Action plugin ks_telemetry: runs installer.ansible_tasks.ks_telemetry in Ansible's worker process."""

from installer.ansible_tasks import ks_telemetry
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_telemetry
