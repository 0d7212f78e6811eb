"""Spec values and cluster facts are data, never code: the engine hands every string to Ansible as unsafe text,
so a value that looks like a template (``{{ lookup('pipe', ...) }}``) reaches the roles byte for byte and runs
nothing. Runs the real PlaybookRunner (ansible-runner, ansible-playbook), no cluster."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible._internal._datatag._tags import TrustedAsTemplate
from ansible.parsing.dataloader import DataLoader

from installer.engine.plan import Action, Step
from installer.engine.runner import EXTRAVARS, PlaybookRunner, write_extravars
from installer.engine_settings import Settings

REPO = Path(__file__).resolve().parents[2]
MODULE = "telemetry"


def _hostile(tmp: Path) -> dict[str, str]:
    """Values that Jinja would evaluate; ``pipe`` ones would leave ``<tmp>/pwned-*`` behind."""
    return {
        "nested": f"{{{{ lookup('pipe', 'touch {tmp}/pwned-nested') }}}}",
        "item": "{% raw %}x{% endraw %}",
        "value": "{# c #}",
        "fact": f"{{{{ lookup('pipe', 'touch {tmp}/pwned-fact') }}}}",
        "block": f"{{% set _ = lookup('pipe', 'touch {tmp}/pwned-block') %}}done",
        "header": f"#jinja2:variable_start_string:'[[',variable_end_string:']]'\n[[ lookup('pipe', 'touch {tmp}/"
                  "pwned-header') ]]",
    }


def _variables(values: dict[str, str]) -> dict[str, Any]:
    """A spec with each value at another depth, and a cluster fact; strings YAML reads as other types too."""
    return {
        "telemetry_enabled": True,
        "common": {"deep": {"nested": values["nested"], "plain": ["", "true", "12", "~", "2024-01-01"]}},
        "registries": ["ok", values["item"]],
        "options": {"comment": values["value"], "block": values["block"], "header": values["header"]},
        "kubernetes_version": values["fact"],
        "nodeNum": 1,
    }


def _playbook(out: Path) -> list[dict[str, Any]]:
    """Renders each value in a task argument (set_fact, in Ansible's process) and writes them with one copy, writes
    all of them with a template, and the spec as JSON."""
    sources = {"nested": "common.deep.nested", "item": "registries[1]", "value": "options.comment",
               "fact": "kubernetes_version", "block": "options.block", "header": "options.header"}
    renders = [{"ansible.builtin.set_fact": {f"rendered_{name}": f"{{{{ {expr} }}}}"},
                "ignore_errors": True}  # evaluated, a value may fail: each still gets its chance to run
               for name, expr in sources.items()]
    values = "{{ {" + ", ".join(f"'{name}': rendered_{name} | default('')" for name in sources) + "} | to_json }}"
    copy = {"ansible.builtin.copy": {"dest": f"{out}/values.json", "content": values, "mode": "0600"}}
    (out / "values.j2").write_text("".join(f"{{{{ {expr} }}}}\n" for expr in sources.values()))
    template = {"ansible.builtin.template": {"src": f"{out}/values.j2", "dest": f"{out}/template", "mode": "0600"}}
    spec = {"ansible.builtin.copy": {"dest": f"{out}/spec.json", "mode": "0600",
                                     "content": "{{ {'common': common, 'options': options} | to_json }}"}}
    return [{"hosts": "localhost", "gather_facts": False, "tasks": [*renders, copy, template, spec]}]


def _settings(tmp: Path) -> Settings:
    playbooks = tmp / "playbooks"
    playbooks.mkdir()
    return Settings(base_dir=tmp, playbooks_dir=playbooks, roles_dir=REPO / "roles", results_dir=tmp / "results",
                    run_dir=tmp / "run", max_parallel=1, module_timeout=300, console_timeout=60, drift_interval=0)


def test_hostile_values_reach_the_playbook_literally_and_run_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    settings = _settings(tmp_path)
    (settings.playbooks_dir / f"{MODULE}.yaml").write_text(yaml.safe_dump(_playbook(out)))
    values = _hostile(tmp_path)
    variables = _variables(values)

    outcome = PlaybookRunner(settings, variables, threading.Event()).run(Step(MODULE, Action.INSTALL, "h"))

    assert sorted(p.name for p in tmp_path.glob("pwned-*")) == []
    assert outcome.ok, outcome.message
    assert json.loads((out / "values.json").read_text()) == values
    assert (out / "template").read_text() == "".join(f"{v}\n" for v in values.values())
    written = json.loads((out / "spec.json").read_text())
    assert written == {"common": variables["common"], "options": variables["options"]}
    command = json.loads((settings.results_dir / MODULE / "command").read_text())["command"]
    extra = [command[i + 1] for i, arg in enumerate(command) if arg in ("-e", "--extra-vars")]
    assert len(extra) == 1 and extra[0].startswith("@") and extra[0].endswith(str(EXTRAVARS))


@pytest.mark.parametrize("value", ["", "true", "12", "1.5", "~", "null", "=", "<<", "2024-01-01", "true\n",
                                   "{{ x }}", "{% if %}", "{# c #}", "#jinja2:a\nb", "é\u2028z", " lead", "a: b"])
def test_every_string_is_unsafe_or_cannot_be_a_template(value: str, tmp_path: Path) -> None:
    """Ansible reads ``!unsafe`` over a scalar as if it were plain (``""`` would be null, ``"true"`` a bool): such
    strings stay plain, and YAML's patterns for other types admit no template syntax."""
    variables = {"top": value, "deep": {"list": [value, {"key": value}]}, value: "k"}
    path = write_extravars(tmp_path, variables)
    assert path == tmp_path / EXTRAVARS and path.stat().st_mode & 0o777 == 0o600
    loaded = DataLoader().load_from_file(str(path), trusted_as_template=True)
    assert loaded == variables
    for text in (loaded["top"], loaded["deep"]["list"][0], loaded["deep"]["list"][1]["key"]):
        if TrustedAsTemplate.is_tagged_on(text):
            assert not any(mark in text for mark in "{#%"), repr(text)
