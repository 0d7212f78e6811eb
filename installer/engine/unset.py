"""Values that mean "unset" compare equal in change detection.

A ``null`` where a scalar belongs is removed before the defaults apply (installer.config.nulls), so it already
equals an absent key, and an absent key takes its default. Left over are the keys upstream's default cc leaves out
although the roles read an empty string there as unset (``| default('', true)``, ``if value``): for them ``""``,
``null`` and absent mean the same. KubeKey's ccs write some of them as ``""`` and others not at all; a module's
inputs hold none of these empty values, so a cc that only spells "unset" differently changes no hash.
"""

from __future__ import annotations

import copy
from typing import Any

#: Spec paths absent from the default cc whose empty string the roles read as unset.
EMPTY_IS_UNSET = (
    "namespace_override",
    "zone",
    "common.containersLogMountedPath",
    "multicluster.proxyPublishAddress",
    "multicluster.hostClusterName",
    "multicluster.clusterControllerResyncPeriod",
    "devops.sonarqube.externalSonarUrl",
    "devops.sonarqube.externalSonarToken",
)

_EMPTY = ("", None)


def _is_empty(value: Any) -> bool:
    return isinstance(value, str | type(None)) and value in _EMPTY


def without_unset(path: str, value: Any) -> Any:
    """``value`` (the spec's at dotted ``path``) with each :data:`EMPTY_IS_UNSET` key under it that holds ``""`` or
    ``null`` removed, and ``None`` (absent) when ``path`` is such a key itself."""
    if path in EMPTY_IS_UNSET:
        return None if _is_empty(value) else value
    inner = [p[len(path) + 1:].split(".") for p in EMPTY_IS_UNSET if p.startswith(path + ".")]
    if not inner or not isinstance(value, dict):
        return value
    out = copy.deepcopy(value)
    for *parents, leaf in inner:
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node and _is_empty(node[leaf]):
            del node[leaf]
    return out


def inputs_without_unset(inputs: dict[str, Any]) -> dict[str, Any]:
    """A module's inputs (dotted path → value) with :func:`without_unset` applied to each."""
    return {path: without_unset(path, value) for path, value in inputs.items()}
