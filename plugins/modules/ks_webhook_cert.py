#!/usr/bin/python
"""Ansible module: ensure a serving certificate Secret (a generated CA + certificate; see installer.certs)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_webhook_cert
short_description: Create, keep or renew a certificate Secret; returns only the CA certificate.
options:
  module: {description: Installer module that owns the Secret (label value)., type: str, required: true}
  namespace: {description: Namespace of the Secret and of the webhook Service., type: str, required: true}
  service: {description: Name of the webhook Service the certificate is for., type: str, required: true}
  renew_before_days: {description: Renew when a certificate expires within this many days., type: int, default: 30}
  secret: {description: The Secret's name., type: str, default: ks-controller-manager-webhook-cert}
  ca_name: {description: The CA's common name., type: str, default: ks-controller-manager-ca}
  cert_name: {description: The certificate's common name., type: str, default: ks-core-admission-webhook}
  keys:
    description: The Secret's keys for the CA certificate, the certificate and its private key, in that order.
    type: list
    elements: str
    default: [ca.crt, tls.crt, tls.key]
  type: {description: The Secret's type when it is created., type: str, default: Opaque}
"""

from ansible.module_utils.basic import AnsibleModule

from installer.ansible_tasks import ks_webhook_cert as task
from installer.ansible_tasks import run_module


def main() -> None:
    run_module(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE),
               task.run)


if __name__ == "__main__":
    main()
