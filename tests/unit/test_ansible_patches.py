"""installer.launch.ansible_patches: what the fork server changes in Ansible and Jinja makes runs cheaper and changes no
rendered output; the patches apply only on the ansible-core release they were written for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from installer.launch import ansible_patches

TEMPLATE = """{% set names = [] %}{% for m in modules if m.on %}{% set _ = names.append(m.name | upper) %}{% endfor %}
kind: ConfigMap
data:
  modules: "{{ names | join(',') }}"
"""
MODULES = [{"name": "ks-core", "on": True}, {"name": "redis", "on": False}, {"name": "monitoring", "on": True}]
RENDERED = '\nkind: ConfigMap\ndata:\n  modules: "KS-CORE,MONITORING"'


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Jinja with the template code cache in ``tmp_path/templates``, put back as it was after the test."""
    monkeypatch.setattr(jinja2.Environment, "compile", jinja2.Environment.compile)
    monkeypatch.setattr(jinja2.Environment, "compile_expression", jinja2.Environment.compile_expression)
    assert ansible_patches.cache_template_code(tmp_path / "templates")
    (directory,) = (tmp_path / "templates").iterdir()
    return directory


def _render(**options: bool) -> str:
    return jinja2.Environment(**options).from_string(TEMPLATE).render(modules=MODULES)


def test_a_template_renders_the_same_from_the_cache(cached: Path) -> None:
    first = _render()
    assert len(list(cached.iterdir())) == 1
    assert _render() == first == RENDERED
    assert len(list(cached.iterdir())) == 1  # read back, not compiled again


def test_environment_options_that_change_the_code_are_part_of_the_key(cached: Path) -> None:
    plain, trimmed = _render(), _render(trim_blocks=True)
    assert len(list(cached.iterdir())) == 2
    assert plain != trimmed and _render(trim_blocks=True) == trimmed


def test_an_expression_is_cached_by_its_source(cached: Path) -> None:
    environment = jinja2.Environment()
    assert environment.compile_expression("x | length > 1")(x=[1, 2]) is True
    assert environment.compile_expression("x | length > 1")(x=[1]) is False
    assert environment.compile_expression("x * 2")(x=3) == 6
    assert len(list(cached.iterdir())) == 2


def test_a_damaged_entry_is_compiled_again(cached: Path) -> None:
    first = _render()
    (entry,) = cached.iterdir()
    entry.write_bytes(b"not marshal data")
    assert _render() == first


def test_no_cache_where_the_directory_cannot_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jinja2.Environment, "compile", jinja2.Environment.compile)
    (tmp_path / "file").write_text("")
    assert not ansible_patches.cache_template_code(tmp_path / "file" / "templates")
    assert not getattr(jinja2.Environment.compile, "_ks_cached", False)
    assert _render() == RENDERED


def test_another_version_sets_leaves_its_directory_to_go(tmp_path: Path, cached: Path) -> None:
    stale = tmp_path / "templates" / "0123456789abcdef"
    stale.mkdir()
    (stale / "entry").write_bytes(b"")
    ansible_patches.cache_template_code(tmp_path / "templates")
    assert [p.name for p in (tmp_path / "templates").iterdir()] == [cached.name]


def _apply_in_a_new_interpreter(tmp_path: Path, version: str | None) -> list[str]:
    """``apply`` where Ansible is not imported yet (as in the fork server), with ansible-core's version faked."""
    fake = "" if version is None else f"""
from installer.launch import ansible_private
ansible_private.ansible_core_version = lambda: {version!r}
"""
    script = fake + f"""
import json
from pathlib import Path
from installer.launch import ansible_patches
print(json.dumps(ansible_patches.apply(Path({str(tmp_path / 'cache')!r}))))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(proc.stdout)


def test_ansible_is_patched_only_on_the_release_the_patches_were_written_for(tmp_path: Path) -> None:
    assert _apply_in_a_new_interpreter(tmp_path, None) == ["collection metadata", "config definitions",
                                                          "template code"]
    other = tmp_path / "other"
    assert _apply_in_a_new_interpreter(other, "2.20.0") == []
    assert not (other / "cache").exists()  # no template code cache either: its key reads an Ansible switch
