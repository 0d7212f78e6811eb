"""``python -m installer images``: the images a cc deploys, for mirroring before an air-gapped install."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from engine_zygote import ENGINE
from installer_state import cc_with

REPO = Path(__file__).resolve().parents[2]


def images(tmp_path: Path, *args: str, **changes: Any) -> subprocess.CompletedProcess[str]:
    cc = tmp_path / "cc.yaml"
    cc.write_text(yaml.safe_dump(cc_with(**changes)))
    return subprocess.run([*ENGINE, "images", "--desired", str(cc), *args],
                          capture_output=True, text=True, cwd=REPO, check=False)


def test_default_install_lists_the_console_and_monitoring_images(tmp_path: Path) -> None:
    proc = images(tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == sorted(set(lines))
    assert {"kubesphere/ks-apiserver:v3.4.1", "kubesphere/ks-console:v3.4.1", "prom/prometheus:v2.39.1",
            "csiplugin/snapshot-controller:v4.0.0", "kubesphere/kubectl:v1.22.0"} <= set(lines)
    assert not any("redis" in line or "openldap" in line for line in lines)  # disabled by default


def test_enabled_modules_and_registry_settings_apply(tmp_path: Path) -> None:
    proc = images(tmp_path, "-o", "json", local_registry="reg.local:5000", namespace_override="mirror",
                  common__redis={"enabled": True, "enableHA": True})
    assert proc.returncode == 0, proc.stderr
    by_module = json.loads(proc.stdout)
    assert by_module["redis"] == ["reg.local:5000/mirror/redis:5.0.14-alpine",
                                  "reg.local:5000/mirror/haproxy:2.0.25-alpine"]
    assert all(ref.startswith("reg.local:5000/mirror/") for refs in by_module.values() for ref in refs)
    upstream = images(tmp_path, "--upstream", local_registry="reg.local:5000", common__redis={"enabled": True})
    assert "redis:5.0.14-alpine" in upstream.stdout.splitlines() and "reg.local" not in upstream.stdout


def test_external_monitoring_deploys_no_prometheus(tmp_path: Path) -> None:
    proc = images(tmp_path, common__monitoring={"type": "external", "endpoint": "http://prom.example.com:9090"})
    assert proc.returncode == 0, proc.stderr
    assert "prom/prometheus:v2.39.1" not in proc.stdout and "kubesphere/ks-apiserver:v3.4.1" in proc.stdout


def test_an_invalid_spec_is_refused(tmp_path: Path) -> None:
    proc = images(tmp_path, local_registry=["not", "a", "string"])
    assert proc.returncode == 2 and "local_registry" in proc.stderr and proc.stdout == ""
