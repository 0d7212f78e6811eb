"""Kubernetes API access shared by the engine and the Ansible side: client setup."""

from __future__ import annotations

import os
from typing import Any

from kubernetes import client, config


class ApiUnavailable(RuntimeError):
    """The API server cannot be reached or refused the installer's credentials."""


def api_client() -> client.ApiClient:
    """In-cluster config when running in a pod, else the kubeconfig (``$KUBECONFIG``)."""
    try:
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
            config.load_incluster_config()
        else:
            config.load_kube_config()
    except config.ConfigException as exc:
        raise ApiUnavailable(f"no Kubernetes credentials: {exc}") from exc
    return client.ApiClient()


def response_body(response: Any) -> bytes:
    """The body of a response read with ``_preload_content=False``; its connection goes back to the pool."""
    try:
        return response.data
    finally:
        response.release_conn()
