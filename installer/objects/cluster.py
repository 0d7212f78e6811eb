"""The engine's view of the cluster: the ClusterConfiguration and the facts the playbooks read (engine only)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from installer.config.validate import loads_json
from installer.objects.kube import response_body
from installer.settings import CC_GROUP, CC_NAME, CC_PLURAL, CC_VERSION, NAMESPACE


class ClusterConfigurations:
    """Reads the cc and writes its status. The cc is read with ``loads_json`` and no call decodes the cc the API
    server sends back: a spec nested deeper than Python's JSON decoder survives (the API server accepts one
    nested a thousand deep) is read and refused as invalid like any other."""

    def __init__(self, api: client.ApiClient, name: str = CC_NAME, namespace: str = NAMESPACE) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.name, self.namespace = name, namespace

    def get(self) -> dict[str, Any] | None:
        try:
            response = self.custom.get_namespaced_custom_object(CC_GROUP, CC_VERSION, self.namespace, CC_PLURAL,
                                                                self.name, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return loads_json(response_body(response))

    def remove_annotation(self, key: str) -> None:
        self.set_annotation(key, None)

    def set_annotation(self, key: str, value: str | None) -> None:
        patch = {"metadata": {"annotations": {key: value}}}
        response_body(self.custom.patch_namespaced_custom_object(CC_GROUP, CC_VERSION, self.namespace, CC_PLURAL,
                                                                 self.name, patch, _preload_content=False))

    def delete(self) -> None:
        try:
            response_body(self.custom.delete_namespaced_custom_object(CC_GROUP, CC_VERSION, self.namespace,
                                                                      CC_PLURAL, self.name, _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise

    def patch_status(self, status: dict[str, Any]) -> None:
        """JSON-merge-patch ``.status`` (null values delete keys)."""
        try:
            self._merge_patch("/status", {"status": status})
        except ApiException as exc:
            if exc.status != 404:
                raise
            # No status subresource (older CRD): patch the main resource like upstream tools did.
            self._merge_patch("", {"status": status})

    def _merge_patch(self, subresource: str, body: dict[str, Any]) -> None:
        self.custom.api_client.call_api(
            f"/apis/{CC_GROUP}/{CC_VERSION}/namespaces/{self.namespace}/{CC_PLURAL}/{self.name}{subresource}",
            "PATCH", body=body, header_params={"Content-Type": "application/merge-patch+json"},
            auth_settings=["BearerToken"], _return_http_data_only=True)

    def patch_status_at(self, status: dict[str, Any], resource_version: str) -> bool:
        """JSON-merge-patch ``.status`` only while the cc is at ``resource_version``; False if it moved on (a newer
        edit, or any other write, since it was read)."""
        try:
            self._merge_patch("/status", {"metadata": {"resourceVersion": resource_version}, "status": status})
        except ApiException as exc:
            if exc.status == 409:
                return False
            if exc.status != 404:
                raise
            self.patch_status(status)  # no status subresource (an older CRD): unguarded, as every write there
        return True


CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def cluster_facts(api: client.ApiClient) -> dict[str, Any]:
    """Facts the playbooks read, from one list of the nodes: Kubernetes version, node count (upstream
    ``kubernetes_version``/``nodeNum``), the number of control-plane nodes (``ks_master_num``) and the container
    runtime as the first node reports it (``ks_node_runtime_version``, read as upstream did; kubesphere-defaults
    derives ``ks_node_runtime`` from it)."""
    version = client.VersionApi(api).get_code().git_version
    # Plain JSON, not the client's models: building 500 V1Node objects costs a second; reading them as data does not.
    nodes = json.loads(response_body(client.CoreV1Api(api).list_node(_preload_content=False))).get("items") or []
    masters = [n for n in nodes if any(label in (n["metadata"].get("labels") or {}) for label in CONTROL_PLANE_LABELS)]
    info = ((nodes[0].get("status") or {}).get("nodeInfo") or {}) if nodes else {}
    return {"kubernetes_version": version, "nodeNum": len(nodes), "ks_master_num": len(masters),
            "ks_node_runtime_version": info.get("containerRuntimeVersion") or ""}
