"""Every module and every additive variant on, servicemesh included (etcd monitoring without TLS: no client
certificates needed): the spec patch of the all-modules reconciles (tests/integration/test_parity.py, and the image's
in tests/e2e/test_image.py)."""

from __future__ import annotations

import copy
from typing import Any

from installer_state import DEFAULT_CC

from installer.spec import merge

ALL_ON: dict[str, Any] = {
    "common": {"redis": {"enabled": True}, "openldap": {"enabled": True},
               "opensearch": {"enabled": True, "dashboard": {"enabled": True}}},
    "etcd": {"monitoring": True, "endpointIps": "192.168.0.11", "tlsEnable": False},
    "monitoring": {"gpu": {"nvidia_dcgm_exporter": {"enabled": True}}, "grafana": {"enabled": True}},
    "metrics_server": {"enabled": True},
    "alerting": {"enabled": True}, "auditing": {"enabled": True}, "devops": {"enabled": True},
    "events": {"enabled": True}, "logging": {"enabled": True}, "servicemesh": {"enabled": True},
    "gatekeeper": {"enabled": True}, "openpitrix": {"store": {"enabled": True}},
    "network": {"topology": {"type": "weave-scope"}},
    "multicluster": {"clusterRole": "host"},
    "edgeruntime": {"enabled": True, "kubeedge": {"enabled": True, "cloudCore": {"cloudHub": {
        "advertiseAddress": ["192.168.0.20"]}}}},
    "telemetry_enabled": True,
}


def spec(*patches: dict[str, Any]) -> dict[str, Any]:
    """The default cc's spec with ``patches`` deep-merged in order."""
    out = copy.deepcopy(DEFAULT_CC["spec"])
    for patch in patches:
        merge(out, copy.deepcopy(patch))
    return out
