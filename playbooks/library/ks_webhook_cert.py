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


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "module": {"type": "str", "required": True},
            "namespace": {"type": "str", "required": True},
            "service": {"type": "str", "required": True},
            "renew_before_days": {"type": "int", "default": 30},
            "secret": {"type": "str", "default": "ks-controller-manager-webhook-cert"},
            "ca_name": {"type": "str", "default": "ks-controller-manager-ca"},
            "cert_name": {"type": "str", "default": "ks-core-admission-webhook"},
            "keys": {"type": "list", "elements": "str", "default": ["ca.crt", "tls.crt", "tls.key"],
                     "no_log": False},
            "type": {"type": "str", "default": "Opaque"},
        },
    )
    import datetime as dt

    from installer.certs import Layout, ensure
    from installer.kube import api_client

    p = am.params
    try:
        if len(p["keys"]) != 3:
            am.fail_json(msg="keys: name the CA certificate, the certificate and the key (three keys)")
        layout = Layout(p["secret"], p["ca_name"], p["cert_name"], tuple(p["keys"]), p["type"])
        outcome = ensure(api_client(), p["namespace"], p["module"], p["service"],
                         dt.timedelta(days=p["renew_before_days"]), layout)
    except Exception as exc:  # API errors become a task failure; their text holds no key material
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    am.exit_json(changed=outcome.changed, reason=outcome.reason, ca_bundle=outcome.ca_bundle)


if __name__ == "__main__":
    main()
