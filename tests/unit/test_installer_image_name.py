"""The installer's image has one name, installer/version.py's INSTALLER_IMAGE (this project's repository at the
installer's version): the chart's defaults, deploy/kubesphere-installer.yaml, ``python -m installer images`` and
README name it, and none names upstream's installer image."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import yaml
from engine_zygote import ENGINE
from installer_state import cc_with

from installer.version import INSTALLER_IMAGE, INSTALLER_IMAGE_REPOSITORY, INSTALLER_VERSION

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "charts" / "ks-installer"
UPSTREAM = "kubesphere/ks-installer"


def test_the_chart_defaults_to_the_name_and_version() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert values["image"]["repository"] == INSTALLER_IMAGE_REPOSITORY != UPSTREAM
    assert values["image"]["tag"] == ""  # the chart's version, which is the installer's
    assert chart["version"] == project["version"] == INSTALLER_VERSION
    assert f"{INSTALLER_IMAGE_REPOSITORY}:{INSTALLER_VERSION}" == INSTALLER_IMAGE


def test_the_manifest_and_readme_name_it() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all((REPO / "deploy" / "kubesphere-installer.yaml").read_text())}
    (container,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == INSTALLER_IMAGE
    readme = (REPO / "README.md").read_text()
    assert INSTALLER_IMAGE in readme and f"{UPSTREAM}:" not in readme


def test_images_lists_it_with_the_mirror_settings(tmp_path: Path) -> None:
    cc = tmp_path / "cc.yaml"
    cc.write_text(yaml.safe_dump(cc_with()))
    plain = subprocess.run([*ENGINE, "images", "--desired", str(cc)], capture_output=True, text=True, cwd=REPO,
                           check=False)
    assert plain.returncode == 0, plain.stderr
    assert INSTALLER_IMAGE in plain.stdout.splitlines()
    cc.write_text(yaml.safe_dump(cc_with(local_registry="reg.local:5000", namespace_override="mirror")))
    mirrored = subprocess.run([*ENGINE, "images", "--desired", str(cc), "-o", "json"], capture_output=True, text=True,
                              cwd=REPO, check=False)
    assert mirrored.returncode == 0, mirrored.stderr
    assert json.loads(mirrored.stdout)["ks-installer"] == [f"reg.local:5000/mirror/ks-installer:{INSTALLER_VERSION}"]
