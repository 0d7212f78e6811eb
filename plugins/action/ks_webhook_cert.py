"""Action plugin ks_webhook_cert: runs installer.ansible_tasks.ks_webhook_cert in Ansible's worker process."""

from installer.ansible_tasks import ks_webhook_cert
from installer.ansible_tasks.action import TaskAction


class ActionModule(TaskAction):
    task = ks_webhook_cert
