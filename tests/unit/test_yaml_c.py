"""The LibYAML loader (installer/yaml_c.py, the roles' ``ks_from_yaml*`` filters) reads what Ansible's own
``from_yaml*`` filters read: the roles' static manifests and YAML 1.1's corner cases."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.plugins.filter.core import from_yaml, from_yaml_all

from installer import yaml_c

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "roles" / "kubesphere-defaults" / "filter_plugins"))
import ks_yaml  # noqa: E402

MANIFESTS = sorted(REPO.glob("roles/*/files/**/*.yaml"))
CORNERS = """\
a: yes
b: off
c: 0o17
d: 017
e: 1_000
f: .inf
g: ~
h: 2024-01-02
i: "quoted: yes"
j: &anchor {k: [1, 2.5, -3]}
l: *anchor
m: {<<: *anchor, n: 1}
o: |
  block
  text
---
---
- !!str 123
- 0x1F
"""


def plain(value: Any) -> Any:
    """Ansible's tagged containers and strings as plain ones, for an equality check."""
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return str(value) if isinstance(value, str) else value


def test_corner_cases_read_as_ansible_reads_them() -> None:
    assert yaml_c.load_all(CORNERS) == plain(list(from_yaml_all(CORNERS)))
    first = CORNERS.split("---")[0]
    assert yaml_c.load(first) == plain(from_yaml(first))
    assert ks_yaml.from_yaml_all(CORNERS) == yaml_c.load_all(CORNERS)
    assert ks_yaml.from_yaml([1]) == [1] and ks_yaml.from_yaml_all({"a": 1}) == {"a": 1}  # non-text unchanged


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(REPO)))
def test_role_files_read_as_ansible_reads_them(path: Path) -> None:
    """The same data, or an error from both (a Go template among them is not YAML to either)."""
    text = path.read_text()
    try:
        theirs = plain(list(from_yaml_all(text)))
    except Exception:  # Ansible wraps the parser's error in its own
        with pytest.raises(yaml.YAMLError):
            ks_yaml.from_yaml_all(text)
        return
    assert ks_yaml.from_yaml_all(text) == theirs
