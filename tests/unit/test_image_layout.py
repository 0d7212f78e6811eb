"""The Dockerfile puts every piece where the hook, the engine and users expect it.

Building the image takes minutes (tests/e2e/test_image.py builds and runs it), so its paths are checked here
against the repo layout, the settings the engine uses and the manifest's volumes.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from installer.engine_settings import IMAGE_PLAYBOOKS, Settings

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()


def _copies() -> dict[str, str]:
    """Where the image has what ``COPY src dest`` lines copy from the repo (sources relative to it): the final
    stage's own, and the build stage's into /rootfs, the tree the final stage is made of."""
    final = DOCKERFILE.split("\nFROM ")[-1]
    assert final.startswith("scratch\n") and "\nCOPY --from=build /rootfs/ /\n" in final
    pairs = re.findall(r"^COPY (?!--from)(\S+) (/rootfs)?(\S+)$", DOCKERFILE, re.M)
    return {src.rstrip("/"): dest for src, rootfs, dest in pairs if rootfs or final.count(f"COPY {src} ")}


def _env() -> dict[str, str]:
    """Every ``ENV`` of the final stage, later ones winning."""
    final = DOCKERFILE.split("\nFROM ")[-1]
    return {k: v for block in final.split("\nENV ")[1:] for k, v in re.findall(r"(\w+)=(\S+)", block.split("\n\n")[0])}


def test_hooks_and_roles_land_outside_what_the_installer_writes() -> None:
    copies = _copies()
    assert copies["hooks"] == "/hooks/"
    assert "plugins" not in copies  # the ks_* tasks and the callback are the installer package's
    assert copies["roles"] == "/opt/ks-installer/roles/"
    assert copies["playbooks"] == f"{IMAGE_PLAYBOOKS}/"  # beside the roles: where the engine looks in the image
    for src in copies:
        assert (REPO / src).exists(), f"Dockerfile copies missing {src}"
    assert (REPO / "hooks" / "kubesphere" / "installRunner.py").exists()


def test_image_env_matches_engine_settings(monkeypatch) -> None:
    env = _env()
    assert env["SHELL_OPERATOR_HOOKS_DIR"] == "/hooks"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings.from_env()
    assert settings.playbooks_dir is None  # every module runs playbooks/ (installer.engine.plays)
    assert str(settings.roles_dir) == env["ANSIBLE_ROLES_PATH"] == "/opt/ks-installer/roles"
    assert str(settings.results_dir) == "/kubesphere/results"
    assert str(settings.running_file) == "/kubesphere/playbooks/kubesphere_running"  # where KubeKey reads it
    assert env["SHELL_OPERATOR_TMP_DIR"].startswith("/tmp/") and env["DEBUG_UNIX_SOCKET"].startswith("/tmp/")


def test_image_runs_shell_operator_as_non_root_with_pinned_tools() -> None:
    # shell-operator under the pod-log formatter of the image's own Python (installer.podlog), in isolated mode
    assert re.search(r'^ENTRYPOINT \["/opt/ks-installer/venv/bin/python3", "-I", "-m", "installer.podlog", '
                     r'"/shell-operator"\]$', DOCKERFILE, re.M)
    assert re.search(r'^CMD \["start"\]$', DOCKERFILE, re.M)
    assert re.search(r"^USER 1002$", DOCKERFILE, re.M)
    # shell-operator only: the installer runs no kubectl or helm
    assert "hack/build-tools.sh shell-operator \\\n" in DOCKERFILE
    assert re.search(r"apt-get install .*\bjq\b", DOCKERFILE)
    # no RUN in the final stage: it has no shell to run one
    assert "\nRUN " not in DOCKERFILE.split("\nFROM ")[-1]


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


def test_what_the_installer_writes_is_a_volume_on_a_read_only_root(monkeypatch) -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all((REPO / "deploy" / "kubesphere-installer.yaml").read_text())}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    mounts = [Path(m["mountPath"]) for m in container["volumeMounts"] if m["name"] in empty]
    env = _env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings.from_env()
    written = [settings.results_dir, settings.run_dir, settings.digest_cache.parent, settings.running_file.parent,
               Path(env["SHELL_OPERATOR_TMP_DIR"]), Path(env["DEBUG_UNIX_SOCKET"]).parent, Path(env["HOME"]),
               Path("/tmp")]
    for path in written:
        assert any(path.is_relative_to(m) for m in mounts), f"{path} is on the read-only root"
    for code in (settings.roles_dir, IMAGE_PLAYBOOKS, Path(env["SHELL_OPERATOR_HOOKS_DIR"])):
        assert not any(code.is_relative_to(m) for m in mounts), f"a volume hides {code}"


def test_a_checkout_keeps_its_files_in_the_users_directory(monkeypatch, tmp_path: Path) -> None:
    for name in ("KS_BASE_DIR", "KS_RESULTS_DIR", "KS_RUN_DIR", "KS_PLAYBOOKS_DIR", "KS_ROLES_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    settings = Settings.from_env()
    base = tmp_path / "ks-installer" / "kubesphere"
    assert (settings.base_dir, settings.results_dir, settings.run_dir) == (base, base / "results", base / "run")
    assert settings.digest_cache.parent == base / "cache" and settings.roles_dir == REPO / "roles"
    assert settings.playbooks_dir is None
