"""A spec the schema accepted once is not checked again (a no-op hook run imports no jsonschema), and nothing else
is taken for checked: another spec, an invalid one, or no cache directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from installer.config.defaults import default_spec

CHECK = """
import json, sys
from installer.config.validate import validate
errors = validate(json.loads(sys.argv[1]))
print(json.dumps({"errors": [e.path for e in errors], "jsonschema": "jsonschema" in sys.modules}))
"""


def _validate(spec: dict, base: Path | None) -> dict:
    env = {"PATH": "/usr/bin:/bin", **({"KS_BASE_DIR": str(base)} if base else {})}
    out = subprocess.run([sys.executable, "-c", CHECK, json.dumps(spec)], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def spec() -> dict:
    return default_spec()


def test_a_spec_accepted_once_is_not_checked_again(tmp_path: Path, spec: dict) -> None:
    assert _validate(spec, tmp_path) == {"errors": [], "jsonschema": True}
    assert len(list((tmp_path / "cache" / "accepted-specs").iterdir())) == 1
    assert _validate(spec, tmp_path) == {"errors": [], "jsonschema": False}
    other = {**spec, "local_registry": "registry.example.com"}
    assert _validate(other, tmp_path) == {"errors": [], "jsonschema": True}


def test_an_invalid_spec_is_never_remembered(tmp_path: Path, spec: dict) -> None:
    bad = {**spec, "etcd": {**spec["etcd"], "monitoring": "yes"}}
    for _ in range(2):
        assert _validate(bad, tmp_path) == {"errors": ["etcd.monitoring"], "jsonschema": True}
    assert not (tmp_path / "cache" / "accepted-specs").exists()


def test_without_a_cache_directory_every_spec_is_checked(spec: dict) -> None:
    for _ in range(2):
        assert _validate(spec, None) == {"errors": [], "jsonschema": True}
