#!/usr/bin/python
"""Ansible module: ensure the webhook serving certificate Secret of ks-controller-manager (see installer.certs)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_webhook_cert
short_description: Create, keep or renew Secret ks-controller-manager-webhook-cert; returns only the CA certificate.
options:
  module: {description: Installer module that owns the Secret (label value)., type: str, required: true}
  namespace: {description: Namespace of the Secret and of the webhook Service., type: str, required: true}
  service: {description: Name of the webhook Service the certificate is for., type: str, required: true}
  renew_before_days: {description: Renew when a certificate expires within this many days., type: int, default: 30}
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "module": {"type": "str", "required": True},
            "namespace": {"type": "str", "required": True},
            "service": {"type": "str", "required": True},
            "renew_before_days": {"type": "int", "default": 30},
        },
    )
    import datetime as dt

    from installer.certs import ensure
    from installer.kube import api_client

    p = am.params
    try:
        outcome = ensure(api_client(), p["namespace"], p["module"], p["service"],
                         dt.timedelta(days=p["renew_before_days"]))
    except Exception as exc:  # API errors become a task failure; their text holds no key material
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    am.exit_json(changed=outcome.changed, reason=outcome.reason, ca_bundle=outcome.ca_bundle)


if __name__ == "__main__":
    main()
