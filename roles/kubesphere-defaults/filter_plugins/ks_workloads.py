"""Jinja filters shared by the roles' pod specs: scheduling and resources from the spec over upstream defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import Undefined

SCHEDULING_FIELDS = ("nodeSelector", "tolerations", "affinity")


def _is_set(value: Any) -> bool:
    return value is not None and not isinstance(value, Undefined)


def ks_first_set(values: list[Any], default: Any = None) -> Any:
    """The first value that is set (neither undefined nor null), else ``default``: upstream's
    ``{% if a is defined and a is not none %}…{% elif b is defined … %}…{% else %}default``."""
    return next((v for v in values if _is_set(v)), default)


def ks_scheduling(layers: list[Any], default: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``nodeSelector``, ``tolerations`` and ``affinity`` of a pod: each from the first layer that sets it
    (``[monitoring, {global keys}]``), else from ``default``. Empty results are left out."""
    default = default or {}
    picked = {f: ks_first_set([layer.get(f) for layer in layers if isinstance(layer, Mapping)], default.get(f))
              for f in SCHEDULING_FIELDS}
    return {f: v for f, v in picked.items() if v}


def _merge(base: Any, override: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        out = dict(base)
        for key, value in override.items():
            if _is_set(value):
                out[key] = _merge(base.get(key), value)
        return out
    return override if _is_set(override) else base


def ks_resources(override: Any, default: Mapping[str, Any]) -> dict[str, Any]:
    """Container resources: ``default`` with every field the spec sets replaced (upstream read each of
    ``limits``/``requests`` ``cpu``/``memory`` from the spec and fell back field by field)."""
    return dict(_merge(dict(default), override if isinstance(override, Mapping) else {}))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_first_set": ks_first_set, "ks_scheduling": ks_scheduling, "ks_resources": ks_resources}
