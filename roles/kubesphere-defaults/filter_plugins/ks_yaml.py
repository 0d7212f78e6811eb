"""Jinja filters ``ks_from_yaml`` and ``ks_from_yaml_all``: a rendered manifest parsed by LibYAML's safe loader.

Ansible's own ``from_yaml`` runs a pure-Python loader that tags every string with its origin, and each tag is
pickled again when a task's result returns from its worker: for a role's manifests that was a third of a run's
time. Manifests need neither: plain data, parsed as YAML 1.1 by the same safe constructor rules.
"""

from __future__ import annotations

from typing import Any

from installer import yaml_c


def from_yaml(text: Any) -> Any:
    """One document; anything but text is returned as it is (as ``from_yaml`` does)."""
    return yaml_c.load(str(text)) if isinstance(text, str) else text


def from_yaml_all(text: Any) -> Any:
    """Every document, as a list; anything but text is returned as it is (as ``from_yaml_all`` does)."""
    return yaml_c.load_all(str(text)) if isinstance(text, str) else text


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ks_from_yaml": from_yaml, "ks_from_yaml_all": from_yaml_all}
