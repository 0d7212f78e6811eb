"""ks_telemetry: the cluster's id in the cc status, and upstream's anonymous usage report."""

from __future__ import annotations

import ssl
import time
import urllib.parse
import urllib.request
import uuid
from typing import Any

from kubernetes import client

from installer.ansible_tasks import TaskFailed, argument_spec, task_plugin
from installer.objects.cluster import ClusterConfigurations
from installer.objects.kube import api_client

DOCUMENTATION = r"""
module: ks_telemetry
short_description: Ensure status.clusterId on the cc, then send the usage report (a GET with query parameters).
description:
  - The id (<uuid>-<epoch>, as upstream) is created once and kept. The report carries what upstream's telemetry
    role sent - Kubernetes and KubeSphere versions, control-plane and node counts, the creation times of kube-system
    and kubesphere-system, the first node's OS image and machine id, the status keys and the cluster role.
  - A failed send is reported (sent false, its reason), never a task failure, as upstream ignored it.
options:
  url: {description: Where the report goes., type: str, required: true}
  cluster_role: {description: multicluster.clusterRole., type: str, default: none}
  timeout: {description: Seconds for the request., type: int, default: 10}
"""
ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
__getattr__ = task_plugin(__name__)
SUPPORTS_CHECK_MODE = False
CONTROL_PLANE = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def report(api: Any, status: dict[str, Any], cluster_id: str, cluster_role: str) -> dict[str, str]:
    core = client.CoreV1Api(api)
    nodes = core.list_node().items
    first = nodes[0] if nodes else None
    info = first.status.node_info if first is not None else None

    def created(namespace: str) -> str:
        return core.read_namespace(namespace).metadata.creation_timestamp.isoformat()

    return {
        "k8s": info.kubelet_version if info else "", "ks": (status.get("core") or {}).get("version", ""),
        "ha": str(sum(1 for n in nodes if any(k in (n.metadata.labels or {}) for k in CONTROL_PLANE))),
        "c": str(len(nodes)), "K8st": created("kube-system"), "Kst": created("kubesphere-system"),
        "os": info.os_image if info else "", "mID": info.machine_id if info else "", "clusterId": cluster_id,
        "mod": "-".join(sorted(k for k in status if k not in ("clusterId", "modules", "conditions"))),
        "multi": cluster_role,
    }


def send(url: str, params: dict[str, str], timeout: int) -> str | None:
    """GET ``url`` with ``params``; the error, or None."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # as upstream (validate_certs: false)
    try:
        with urllib.request.urlopen(f"{url}?{urllib.parse.urlencode(params)}", timeout=timeout, context=context):
            return None
    except OSError as exc:
        return str(exc)


def run(p: dict[str, Any]) -> dict[str, Any]:
    try:
        api = api_client()
        ccs = ClusterConfigurations(api)
        status = (ccs.get() or {}).get("status") or {}
        cluster_id, created = status.get("clusterId"), False
        if not cluster_id:
            cluster_id, created = f"{uuid.uuid4()}-{int(time.time())}", True
            ccs.patch_status({"clusterId": cluster_id})
        params = report(api, status, cluster_id, p["cluster_role"])
    except Exception as exc:  # API errors become a task failure with their text
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    error = send(p["url"], params, p["timeout"])
    return {"changed": created, "cluster_id": cluster_id, "report": params, "sent": error is None, "error": error}
