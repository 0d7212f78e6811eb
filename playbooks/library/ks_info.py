#!/usr/bin/python
"""Ansible module: read Kubernetes objects (one by name, or a list by namespace and label selector)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_info
short_description: Get objects of one kind; a missing object or an unserved kind gives an empty list.
options:
  api_version: {description: apiVersion of the kind., type: str, default: v1}
  kind: {description: Kind to read., type: str, required: true}
  name: {description: Object name; omit to list., type: str}
  namespace: {description: Namespace; omit for cluster-scoped kinds or all namespaces., type: str}
  label_selector: {description: Label selector when listing., type: str}
  keys_only:
    description: Return only the keys of each object's data (values blanked), e.g. to check a Secret's keys
      without its values reaching a result or job event.
    type: bool
    default: false
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "api_version": {"type": "str", "default": "v1"},
            "kind": {"type": "str", "required": True},
            "name": {"type": "str"},
            "namespace": {"type": "str"},
            "label_selector": {"type": "str"},
            "keys_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

    from installer.kube import api_client

    p = am.params
    try:
        res = DynamicClient(api_client()).resources.get(api_version=p["api_version"], kind=p["kind"])
        found = res.get(name=p["name"], namespace=p["namespace"], label_selector=p["label_selector"]).to_dict()
        resources = found.get("items", []) if p["name"] is None else [found]
    except (NotFoundError, ResourceNotFoundError):
        resources = []
    except Exception as exc:  # API errors become a task failure with their text
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    if p["keys_only"]:
        for item in resources:
            for field in ("data", "stringData", "binaryData"):
                if isinstance(item.get(field), dict):
                    item[field] = dict.fromkeys(item[field], "")
    am.exit_json(changed=False, resources=resources)


if __name__ == "__main__":
    main()
