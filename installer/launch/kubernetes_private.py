"""The private name of the Kubernetes Python client the installer uses, behind a function that checks the running
release first: written for kubernetes :data:`WRITTEN_FOR` (the version ``pyproject.toml`` pins); on another release it
falls back (see the function)."""

from __future__ import annotations

import functools
import logging

log = logging.getLogger("installer")

#: The release of the ``kubernetes`` package whose private names are used below.
WRITTEN_FOR = "33.1.0"


@functools.cache
def kubernetes_version() -> str:
    """The version of the ``kubernetes`` package the process imports."""
    import kubernetes

    return str(kubernetes.__version__)


def kubeconfig_temp_files() -> dict[str, str]:
    """The certificate and key files a kubeconfig load has written, by content (``kubernetes.config.kube_config.
    _temp_files``, which the client removes only when the process exits; kubernetes 33.1.0): the live mapping, so a
    caller may remove the files it made and their entries. On another release an empty mapping: nothing is removed
    before the process exits."""
    if kubernetes_version() != WRITTEN_FOR:
        log.debug("kubernetes %s is not %s: kubeconfig temp files are left to its exit", kubernetes_version(),
                  WRITTEN_FOR)
        return {}
    from kubernetes.config import kube_config

    files: dict[str, str] = kube_config._temp_files
    return files
