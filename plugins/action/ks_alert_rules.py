"""Action plugin ks_alert_rules: runs installer.ansible_tasks.ks_alert_rules in Ansible's worker process."""

from installer.ansible_tasks import ks_alert_rules
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_alert_rules
