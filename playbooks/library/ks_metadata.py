#!/usr/bin/python
"""Ansible module: own a few labels or annotations on objects the installer does not own (namespaces, nodes,
built-in ClusterRoles)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ks_metadata
short_description: Server-side apply only metadata.labels and metadata.annotations of existing objects.
description:
  - For several objects of one kind in one call, without the module label. An object is never created, adopted,
    pruned or deleted; missing ones (or ones being deleted) are reported (missing), not an error. Absent gives
    the labels and annotations back (the field manager stops owning them, so the API server removes those no other
    manager owns, e.g. one that `kubectl label` set before).
options:
  api_version: {description: apiVersion of the objects., type: str, default: v1}
  kind: {description: Kind of the objects., type: str, default: Namespace}
  names: {description: Names of the objects., type: list, elements: str, required: true}
  namespace: {description: Namespace of the objects; omit for cluster-scoped kinds., type: str}
  labels: {description: Labels to own., type: dict, default: {}}
  annotations: {description: Annotations to own., type: dict, default: {}}
  field_manager: {description: Field manager that owns them (one per use, kept across versions)., type: str,
                  required: true}
  state: {description: present sets them; absent removes them., type: str, default: present}
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    am = AnsibleModule(
        argument_spec={
            "api_version": {"type": "str", "default": "v1"},
            "kind": {"type": "str", "default": "Namespace"},
            "names": {"type": "list", "elements": "str", "required": True},
            "namespace": {"type": "str"},
            "labels": {"type": "dict", "default": {}},
            "annotations": {"type": "dict", "default": {}},
            "field_manager": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        },
    )
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import NotFoundError

    from installer.kube import api_client

    p = am.params
    changed, missing = [], []
    try:
        res = DynamicClient(api_client()).resources.get(api_version=p["api_version"], kind=p["kind"])
        for name in p["names"]:
            try:
                before = res.get(name=name, namespace=p["namespace"])
            except NotFoundError:
                missing.append(name)
                continue
            if before.metadata.deletionTimestamp:
                missing.append(name)
                continue
            metadata = {"name": name, **({"namespace": p["namespace"]} if p["namespace"] else {})}
            if p["state"] == "present":
                metadata |= {key: {k: str(v) for k, v in p[key].items()}
                             for key in ("labels", "annotations") if p[key]}
            body = {"apiVersion": p["api_version"], "kind": p["kind"], "metadata": metadata}
            after = res.server_side_apply(body=body, name=name, namespace=p["namespace"],
                                          field_manager=p["field_manager"], force_conflicts=True)
            if before.metadata.resourceVersion != after.metadata.resourceVersion:
                changed.append(name)
    except Exception as exc:  # API errors become a task failure with their text
        am.fail_json(msg=f"{type(exc).__name__}: {exc}")
    am.exit_json(changed=bool(changed), updated=changed, missing=missing)


if __name__ == "__main__":
    main()
