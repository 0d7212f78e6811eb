"""Module hashes: inputs, the files a module's play really uses, and readable change descriptions."""

from __future__ import annotations

from pathlib import Path

import pytest

from installer.engine.changes import describe_changes
from installer.engine.fingerprint import files_digest, inputs_of, module_hash, roles_used
from installer.engine.plays import dump, module_plays, play_text, playbook_file
from installer.modules import MODULES, get_module

REPO = Path(__file__).resolve().parents[2]


def _tree(tmp_path: Path) -> Path:
    """Roles: gatekeeper's play (playbooks/install.yaml) runs kubesphere-defaults then gatekeeper."""
    roles = tmp_path / "roles"
    for role, tasks in {"kubesphere-defaults": "- debug: msg=x\n",
                        "gatekeeper": "- include_role:\n    name: shared\n",
                        "shared": "- debug: msg=y\n",
                        "unrelated": "- debug: msg=z\n"}.items():
        (roles / role / "tasks").mkdir(parents=True)
        (roles / role / "tasks" / "main.yaml").write_text(tasks)
    (roles / "gatekeeper" / "meta").mkdir()
    (roles / "gatekeeper" / "meta" / "main.yaml").write_text("dependencies:\n  - role: dep\n")
    (roles / "dep" / "tasks").mkdir(parents=True)
    (roles / "dep" / "tasks" / "main.yaml").write_text("- debug: msg=d\n")
    return roles


def test_roles_used_follows_includes_and_meta_dependencies(tmp_path: Path) -> None:
    roles = _tree(tmp_path)
    plays = module_plays(get_module("gatekeeper"))
    assert roles_used(plays, roles) == ["dep", "gatekeeper", "kubesphere-defaults", "shared"]


def test_files_digest_changes_only_with_files_the_module_uses(tmp_path: Path) -> None:
    roles = _tree(tmp_path)
    module = get_module("gatekeeper")
    before = files_digest.__wrapped__(module, roles)
    (roles / "unrelated" / "tasks" / "main.yaml").write_text("- debug: msg=changed\n")
    assert files_digest.__wrapped__(module, roles) == before
    (roles / "dep" / "tasks" / "main.yaml").write_text("- debug: msg=changed\n")
    assert files_digest.__wrapped__(module, roles) != before


def test_every_module_runs_the_shared_plays_with_its_role_and_a_replacing_play_changes_the_hash(
        tmp_path: Path) -> None:
    """Install runs kubesphere-defaults then the module's role; uninstall the role's uninstall tasks: playbooks/
    install.yaml and uninstall.yaml for every module, with its role as a variable. As the hash covers it, the play is
    the one it runs for the module (a comment in the file changes no hash). A play in the directory of replacing plays
    runs instead and is what the hash covers."""
    monitoring = get_module("monitoring")
    assert playbook_file(monitoring) == REPO / "playbooks" / "install.yaml"
    assert playbook_file(monitoring, uninstall=True) == REPO / "playbooks" / "uninstall.yaml"
    assert "{{ ks_role }}" in (REPO / "playbooks" / "install.yaml").read_text()
    # The hash's play text: the same as when each module's play was written out, so no module re-runs for the move.
    assert play_text(monitoring) == (
        "---\n- name: Install monitoring\n  hosts: localhost\n  gather_facts: false\n  roles:\n"
        "    - kubesphere-defaults\n    - ks-monitor\n")
    assert module_plays(monitoring) == [{"name": "Install monitoring", "hosts": "localhost", "gather_facts": False,
                                      "roles": ["kubesphere-defaults", "ks-monitor"]}]
    assert module_plays(monitoring, uninstall=True) == [{
        "name": "Uninstall monitoring", "hosts": "localhost", "gather_facts": False, "roles": ["kubesphere-defaults"],
        "tasks": [{"name": "Remove monitoring",
                   "ansible.builtin.include_role": {"name": "ks-monitor", "tasks_from": "uninstall"}}]}]
    assert {m.name: m.role for m in MODULES if m.role != m.name} == {"metrics_server": "metrics-server",
                                                                     "monitoring": "ks-monitor"}
    for module in MODULES:
        assert (REPO / "roles" / module.role / "tasks" / "main.yaml").is_file(), module.name
        assert (REPO / "roles" / module.role / "tasks" / "uninstall.yaml").is_file(), module.name

    roles = _tree(tmp_path)
    gatekeeper, plays = get_module("gatekeeper"), tmp_path / "plays"
    plays.mkdir()
    before = files_digest.__wrapped__(gatekeeper, roles, plays_dir=plays)
    assert before == files_digest.__wrapped__(gatekeeper, roles)
    (plays / "gatekeeper.yaml").write_text(dump(module_plays(gatekeeper)))
    assert files_digest.__wrapped__(gatekeeper, roles, plays_dir=plays) == before
    (plays / "gatekeeper.yaml").write_text(dump([{**module_plays(gatekeeper)[0], "vars": {"a": 1}}]))
    assert files_digest.__wrapped__(gatekeeper, roles, plays_dir=plays) != before


def test_hash_depends_on_inputs_only_through_the_module_paths() -> None:
    module = get_module("monitoring")
    base = {"etcd": {"monitoring": False}, "devops": {"enabled": False}}
    h = module_hash(module, inputs_of(module, base), "files")
    assert module_hash(module, inputs_of(module, {**base, "devops": {"enabled": True}}), "files") == h
    assert module_hash(module, inputs_of(module, {**base, "etcd": {"monitoring": True}}), "files") != h
    assert module_hash(module, inputs_of(module, base), "other files") != h


def test_describe_changes_is_dotted_and_redacts_secrets() -> None:
    old = {"common.core": {"console": {"port": 30880}}, "authentication.jwtSecret": "a", "terminal": None}
    new = {"common.core": {"console": {"port": 30881}}, "authentication.jwtSecret": "b", "terminal": {"timeout": 600}}
    assert describe_changes(old, new) == [
        "authentication.jwtSecret: <redacted> -> <redacted>",
        "common.core.console.port: 30880 -> 30881",
        'terminal: null -> {"timeout": 600}',
    ]


def _digests(roles: Path, engine: Path) -> dict[str, str]:
    return {m.name: files_digest.__wrapped__(m, roles, engine) for m in MODULES}


def test_engine_code_a_module_runs_is_part_of_its_hash(tmp_path: Path) -> None:
    """A change to an engine file re-runs exactly the modules whose Ansible modules import it."""
    import shutil

    engine = tmp_path / "installer"
    shutil.copytree(REPO / "installer", engine, ignore=shutil.ignore_patterns("__pycache__"))
    roles = REPO / "roles"
    before = _digests(roles, engine)

    (engine / "objects" / "rollout.py").write_text((engine / "objects" / "rollout.py").read_text() + "\n# changed\n")
    after = _digests(roles, engine)
    assert sorted(m for m in before if before[m] != after[m]) == ["ks-config"]  # only ks_rollout imports it

    manifests = engine / "objects" / "manifests.py"
    manifests.write_text(manifests.read_text() + "\n# changed\n")
    again = _digests(roles, engine)
    users = sorted(m for m in after if after[m] != again[m])
    assert "monitoring" in users and "ks-core" in users and "gatekeeper" in users

    (engine / "engine" / "reconcile.py").write_text((engine / "engine" / "reconcile.py").read_text() + "\n# changed\n")
    assert _digests(roles, engine) == again  # the engine itself runs no module's code


def test_digest_cache_reuses_digests_until_a_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from installer.engine import fingerprint
    from installer.modules import get_module

    roles = tmp_path / "roles"
    (roles / "redis" / "tasks").mkdir(parents=True)
    task = roles / "redis" / "tasks" / "main.yaml"
    task.write_text("- debug: {msg: one}\n")
    cache_file, redis = tmp_path / "cache" / "digests.json", get_module("redis")
    first = fingerprint.DigestCache(cache_file, roles)(redis)
    assert first == fingerprint.files_digest(redis, roles)

    def not_again(*_: object) -> str:
        raise AssertionError("recomputed although no file changed")

    monkeypatch.setattr(fingerprint, "files_digest", not_again)
    assert fingerprint.DigestCache(cache_file, roles)(redis) == first
    monkeypatch.undo()
    task.write_text("- debug: {msg: two}\n")
    fingerprint.files_digest.cache_clear()  # (a hook run is a new process; this test is one)
    second = fingerprint.DigestCache(cache_file, roles)(redis)
    assert second != first and second == fingerprint.files_digest(redis, roles)


def test_one_miss_computes_every_modules_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module switched on after the install finds its digest in the cache: the install's first miss computed
    every module's (they share most files, each parsed once)."""
    import json

    from installer.engine import fingerprint

    cache_file = tmp_path / "digests.json"
    preinstall = fingerprint.DigestCache(cache_file, REPO / "roles")(get_module("preinstall"))
    saved = json.loads(cache_file.read_text())["digests"]
    assert sorted(saved) == sorted(m.name for m in MODULES) and saved["preinstall"] == preinstall

    def not_again(*_: object) -> str:
        raise AssertionError("computed again")

    monkeypatch.setattr(fingerprint, "files_digest", not_again)
    assert fingerprint.DigestCache(cache_file, REPO / "roles")(get_module("metrics_server")) == saved["metrics_server"]
    monkeypatch.undo()
    assert saved["metrics_server"] == fingerprint.files_digest(get_module("metrics_server"), REPO / "roles")


def test_tasks_are_part_of_the_hash_of_the_modules_that_call_them(tmp_path: Path) -> None:
    """A change to a ks_* task's file re-runs exactly the modules whose roles call it, and a change to the action
    plugins' shared base re-runs every module that calls any task."""
    import shutil

    engine = tmp_path / "installer"
    shutil.copytree(REPO / "installer", engine, ignore=shutil.ignore_patterns("__pycache__"))
    roles = REPO / "roles"
    before = _digests(roles, engine)

    plugin = engine / "ansible_tasks" / "ks_rollout.py"
    plugin.write_text(plugin.read_text() + "\n# changed\n")
    after = _digests(roles, engine)
    assert sorted(m for m in before if before[m] != after[m]) == ["ks-config"]

    base = engine / "ansible_tasks" / "_action.py"
    base.write_text(base.read_text() + "\n# changed\n")
    again = _digests(roles, engine)
    assert {"ks-core", "monitoring", "gatekeeper", "ks-config"} <= {m for m in after if after[m] != again[m]}


# The Ansible side (the ks_* tasks and what they import) is a folder: a change to one of its files re-runs the modules
# that run it; engine/, preview/ and launch/ are the engine's alone, but for the guarded private names of ansible-core
# and kubernetes the tasks use (launch/ansible_private.py, launch/kubernetes_private.py). A new import that pulls
# another file into the Ansible side fails here: decide whether a change to that file should re-run modules on every
# cluster.
ANSIBLE_SIDE_DIRS = ("ansible_tasks", "objects")
#: The shared files at the package's top that the Ansible side imports, and the guards it runs through.
SHARED = {"__init__.py", "escape.py", "log_store.py", "s3_store.py", "settings.py", "spec.py", "yaml_c.py",
          "launch/__init__.py", "launch/ansible_private.py", "launch/kubernetes_private.py"}
# telemetry's task reads the cc as the engine does (its report describes the spec): the config package (with the
# data files and bounded JSON it reads through) and the module registry too.
TELEMETRY_ALSO = ("config", "modules.py", "data_files.py", "json_bounded.py", "spec_structure.py")


def test_the_ansible_side_is_a_folder_and_imports_only_what_it_runs() -> None:
    from installer.engine.fingerprint import ENGINE_DIR, code_files

    def engine_files(name: str) -> set[str]:
        return {str(f.relative_to(ENGINE_DIR)) for f in code_files(get_module(name), REPO / "roles")
                if f.is_relative_to(ENGINE_DIR)}

    def outside(files: set[str], dirs: tuple[str, ...]) -> set[str]:
        return {f for f in files if f.split("/")[0] not in dirs and f not in SHARED}

    others = set().union(*(engine_files(m.name) for m in MODULES if m.name != "telemetry"))
    assert outside(others, ANSIBLE_SIDE_DIRS) == set()
    assert {f for f in others if f.startswith("objects/")} == {
        str(f.relative_to(ENGINE_DIR)) for f in (ENGINE_DIR / "objects").glob("*.py")} - {"objects/cluster.py"}
    assert others >= SHARED
    assert outside(engine_files("telemetry"), ANSIBLE_SIDE_DIRS + TELEMETRY_ALSO) == set()
    assert "objects/cluster.py" in engine_files("telemetry")


def test_an_installer_upgrade_of_the_engine_alone_reruns_nothing(tmp_path: Path) -> None:
    """The engine's own files (status, welcome, plan, settings of the image, its version) are in no module's hash:
    an upgrade that changes only them runs no playbook on any cluster."""
    import shutil

    engine = tmp_path / "installer"
    shutil.copytree(REPO / "installer", engine, ignore=shutil.ignore_patterns("__pycache__"))
    roles = REPO / "roles"
    before = _digests(roles, engine)
    for name in ("version.py", "engine_settings.py", "engine/welcome.py", "engine/status.py", "engine/reconcile.py",
                 "engine/plan.py", "engine/state.py", "engine/runner.py", "launch/forkserver.py", "hook.py", "cli.py",
                 "engine/fastpath.py", "engine/executor.py", "preview/render.py", "preview/object_plan.py",
                 "hook_api.py"):
        (engine / name).write_text((engine / name).read_text().replace('"3.4.1"', '"9.9.9"') + "\n# changed\n")
    assert _digests(roles, engine) == before
    (engine / "config" / "validate.py").write_text((engine / "config" / "validate.py").read_text() + "\n# changed\n")
    after = _digests(roles, engine)
    assert sorted(m for m in before if before[m] != after[m]) == ["telemetry"]
    module = get_module("redis")
    assert module_hash(module, {"a": 1}, before["redis"]) == module_hash(module, {"a": 1}, after["redis"])
