#!/usr/bin/python
"""Ansible module: own a few annotations on an object the installer does not own (a built-in ClusterRole)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_annotations
short_description: Server-side apply only metadata.annotations of an existing object, without the module label.
description:
  - The object is never created, labelled, pruned or deleted; absent gives the annotations back (the field
    manager stops owning them, so the API server removes them).
options:
  api_version: {description: apiVersion of the object., type: str, required: true}
  kind: {description: Kind of the object., type: str, required: true}
  name: {description: Name of the object., type: str, required: true}
  namespace: {description: Namespace of the object; omit for cluster-scoped kinds., type: str}
  annotations: {description: Annotations to own., type: dict, default: {}}
  field_manager: {description: Field manager that owns them., type: str, default: ks-installer-annotations}
  state: {description: present sets them; absent removes them., type: str, default: present}
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "api_version": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str"},
            "annotations": {"type": "dict", "default": {}},
            "field_manager": {"type": "str", "default": "ks-installer-annotations"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        },
    )
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import NotFoundError

    from installer.kube import api_client

    p = am.params
    try:
        res = DynamicClient(api_client()).resources.get(api_version=p["api_version"], kind=p["kind"])
        try:
            before = res.get(name=p["name"], namespace=p["namespace"])
        except NotFoundError:
            am.exit_json(changed=False, missing=True)
        metadata = {"name": p["name"], **({"namespace": p["namespace"]} if p["namespace"] else {})}
        if p["state"] == "present":
            metadata["annotations"] = {k: str(v) for k, v in p["annotations"].items()}
        body = {"apiVersion": p["api_version"], "kind": p["kind"], "metadata": metadata}
        after = res.server_side_apply(body=body, name=p["name"], namespace=p["namespace"],
                                      field_manager=p["field_manager"], force_conflicts=True)
    except Exception as exc:  # API errors become a task failure with their text
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    am.exit_json(changed=before.metadata.resourceVersion != after.metadata.resourceVersion, missing=False)


if __name__ == "__main__":
    main()
