"""The Dockerfile puts every piece where the hook, the engine and users expect it.

The image cannot be built here (no container engine), so its paths are checked against the repo layout
and against the settings the engine and the e2e tests use.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from installer.engine_settings import Settings

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()


def _copies() -> dict[str, str]:
    """``COPY src dest`` lines of the final stage (sources relative to the repo)."""
    final = DOCKERFILE.split("\nFROM ")[-1]
    pairs = re.findall(r"^COPY (?!--from)(\S+) (\S+)$", final, re.M)
    return {src.rstrip("/"): dest for src, dest in pairs}


def _env() -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", DOCKERFILE.split("\nENV ", 1)[1].split("\n\n")[0]))


def test_hooks_playbooks_and_roles_land_on_upstream_paths() -> None:
    copies = _copies()
    assert copies["hooks"] == "/hooks/"
    assert copies["playbooks"] == "/kubesphere/playbooks/"
    assert copies["roles"] == "/kubesphere/installer/roles/"
    for src in copies:
        assert (REPO / src).exists(), f"Dockerfile copies missing {src}"
    assert (REPO / "hooks" / "kubesphere" / "installRunner.py").exists()


def test_image_env_matches_engine_settings(monkeypatch) -> None:
    env = _env()
    assert env["SHELL_OPERATOR_HOOKS_DIR"] == "/hooks"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings.from_env()
    assert str(settings.playbooks_dir) == "/kubesphere/playbooks"
    assert str(settings.roles_dir) == env["ANSIBLE_ROLES_PATH"] == "/kubesphere/installer/roles"
    assert str(settings.results_dir) == "/kubesphere/results"
    assert str(settings.running_file) == "/kubesphere/playbooks/kubesphere_running"


def test_image_runs_shell_operator_as_non_root_with_pinned_tools() -> None:
    assert re.search(r'^ENTRYPOINT \["/shell-operator"\]$', DOCKERFILE, re.M)
    assert re.search(r"^USER 1002$", DOCKERFILE, re.M)
    assert "hack/build-tools.sh shell-operator kubectl helm" in DOCKERFILE
    assert re.search(r"apt-get install .*\bjq\b", DOCKERFILE)


def test_deployment_matches_image_and_upstream_contracts() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all((REPO / "deploy" / "kubesphere-installer.yaml").read_text())}
    dep = docs["Deployment"]
    assert dep["metadata"]["labels"]["app"] == "ks-installer"
    assert dep["spec"]["template"]["metadata"]["labels"]["app"] == "ks-installer"
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    assert dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 1002
    crd = docs["CustomResourceDefinition"]
    assert crd["spec"]["names"]["shortNames"] == ["cc"]
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}
