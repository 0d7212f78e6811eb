"""Hostile input the parsers see first: nesting deeper than Python's parsers survive, YAML merge keys and
duplicate keys, and legacy keys whose values a migration drops. Every path refuses a too-deep spec the same way:
invalid, naming where it is too deep and the limit."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_zygote import ENGINE
from installer_state import DEFAULT_CC
from kubernetes import client

from installer.config import prepare
from installer.hook import read_binding_context
from installer.json_bounded import MAX_DEPTH, PARSE_DEPTH, loads_json
from installer.objects.cluster import ClusterConfigurations

REPO = Path(__file__).resolve().parents[2]
DEEP = 995  # the API server accepts it; Python's JSON decoder and PyYAML's composer do not
LIST_PATH = "affinity[0][0][0][0][0][0][0]..."
MAP_PATH = "authentication.oauthOptions.a.a.a.a.a.a..."
TOO_DEEP = f"is nested deeper than {MAX_DEPTH} levels"


def _deep_list(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep_map(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def _cc_json(spec_json: str) -> str:
    """A cc as the API server sends it, with ``spec_json`` as its spec (text: ``json.dumps`` would recurse)."""
    cc = copy.deepcopy(DEFAULT_CC)
    cc["metadata"].update({"generation": 7, "annotations": {"x": "[{"}})
    cc["status"] = {"conditions": []}
    return json.dumps(cc).replace(json.dumps(DEFAULT_CC["spec"]), spec_json)


def _spec_errors(cc: dict[str, Any]) -> list[str]:
    return [str(e) for e in prepare(cc["spec"]).errors]


# ---------------------------------------------------------------- JSON: the cc from the API, the binding context

DEEP_SPECS = pytest.mark.parametrize("spec, error", [
    (f'{{"affinity": {_deep_list(DEEP)}}}', f"{LIST_PATH}: {TOO_DEEP}"),
    (f'{{"authentication": {{"oauthOptions": {_deep_map(DEEP)}}}}}', f"{MAP_PATH}: {TOO_DEEP}"),
], ids=["lists", "mappings"])


@DEEP_SPECS
def test_a_deep_cc_from_the_api_is_an_invalid_spec(spec: str, error: str) -> None:
    class Response:
        data = _cc_json(spec).encode()
        released = False

        def release_conn(self) -> None:
            Response.released = True

    class Custom:
        def get_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Response:
            assert kwargs.get("_preload_content") is False  # the client's own decoder would recurse
            return Response()

    ccs = ClusterConfigurations(client.ApiClient())
    ccs.custom = Custom()  # type: ignore[assignment]
    cc = ccs.get()
    assert cc is not None and Response.released
    assert cc["metadata"]["generation"] == 7 and cc["metadata"]["annotations"] == {"x": "[{"}
    assert _spec_errors(cc) == [error]  # what the reconcile reports: Stalled, reason InvalidSpec, an Event


def test_deleting_the_cc_decodes_no_response() -> None:
    calls: list[dict[str, Any]] = []

    class Response:
        released = False

        @property
        def data(self) -> bytes:
            return _cc_json(_deep_list(DEEP)).encode()

        def release_conn(self) -> None:
            Response.released = True

    class Custom:
        def delete_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Response:
            calls.append(kwargs)
            return Response()

    ccs = ClusterConfigurations(client.ApiClient())
    ccs.custom = Custom()  # type: ignore[assignment]
    ccs.delete()
    assert calls == [{"_preload_content": False}] and Response.released


@DEEP_SPECS
def test_a_deep_cc_in_the_binding_context_is_an_invalid_spec(tmp_path: Path, spec: str, error: str) -> None:
    cc = _cc_json(spec)
    path = tmp_path / "context.json"
    path.write_text(f'[{{"binding": "Monitor clusterconfiguration", "type": "Event", "object": {cc}, '
                    f'"snapshots": {{"Monitor clusterconfiguration": [{{"object": {cc}}}]}}}}]')
    contexts = read_binding_context(str(path))
    assert contexts[0]["binding"] == "Monitor clusterconfiguration"
    assert _spec_errors(contexts[0]["object"]) == [error]
    assert _spec_errors(contexts[0]["snapshots"]["Monitor clusterconfiguration"][0]["object"]) == [error]


def test_nesting_the_decoder_survives_is_read_as_it_is() -> None:
    text = json.dumps({"a": [{"b": "]}[{\\\""}], "c": json.loads(_deep_list(MAX_DEPTH + 10))})
    assert loads_json(text) == json.loads(text)
    errors = _spec_errors({"spec": loads_json(f'{{"affinity": {_deep_list(MAX_DEPTH + 10)}}}')})
    assert errors == [f"{LIST_PATH}: {TOO_DEEP}"]  # the same answer as for the deeper ones


def _wrapped(value: Any, levels: int, key: str | None = None) -> Any:
    """``value`` inside ``levels`` lists (or objects with the one ``key``), built without recursion."""
    for _ in range(levels):
        value = [value] if key is None else {key: value}
    return value


TRICKY = r'"]}[{\"\\"'  # a JSON string holding brackets, an escaped quote and a trailing escaped backslash
TRICKY_VALUE = ']}[{"\\'


@pytest.mark.parametrize("text, expected", [
    ("[" * PARSE_DEPTH + TRICKY + "]" * PARSE_DEPTH, _wrapped(TRICKY_VALUE, PARSE_DEPTH)),  # at the limit: kept
    ("[" * (PARSE_DEPTH + 1) + TRICKY + "]" * (PARSE_DEPTH + 1), _wrapped(None, PARSE_DEPTH)),
    (f'{{"before": {TRICKY}, "deep": ' + "[" * (PARSE_DEPTH + 40) + f"{TRICKY}, [{TRICKY}], {{{TRICKY}: 1}}"
     + "]" * (PARSE_DEPTH + 40) + f', "after": [{TRICKY}]}}',
     {"before": TRICKY_VALUE, "deep": _wrapped(None, PARSE_DEPTH - 1), "after": [TRICKY_VALUE]}),
    ('{"k\\"]": ' * (PARSE_DEPTH + 3) + TRICKY + "}" * (PARSE_DEPTH + 3), _wrapped(None, PARSE_DEPTH, 'k"]')),
    (f"[[{TRICKY}, " + "[" * (PARSE_DEPTH + 2) + "]" * (PARSE_DEPTH + 2) + f", {TRICKY}, "
     + "[" * (PARSE_DEPTH + 9) + TRICKY + "]" * (PARSE_DEPTH + 9) + f"], {TRICKY}]",
     [[TRICKY_VALUE, _wrapped(None, PARSE_DEPTH - 2), TRICKY_VALUE, _wrapped(None, PARSE_DEPTH - 2)], TRICKY_VALUE]),
], ids=["at the limit", "one deeper", "strings before, inside and after the cut", "object keys", "two cuts"])
def test_what_lies_deeper_than_the_parse_depth_is_null(text: str, expected: Any) -> None:
    assert loads_json(text) == expected
    assert loads_json(text.encode()) == expected


def test_unterminated_deep_json_is_a_decode_error() -> None:
    with pytest.raises(ValueError, match="unterminated"):
        loads_json("[" * (PARSE_DEPTH + 1000))
    closers_in_a_string = "[" * (PARSE_DEPTH + 3) + '"' + "]" * (PARSE_DEPTH + 3) + '\\""'
    with pytest.raises(json.JSONDecodeError, match=f"unterminated nesting deeper than {PARSE_DEPTH} levels") as exc:
        loads_json(closers_in_a_string)
    assert exc.value.pos == PARSE_DEPTH  # where the first level too deep opens


# ---------------------------------------------------------------- YAML: plan --desired


def plan(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENGINE, "plan", "--desired", str(path), "-o", "json"],
                          capture_output=True, text=True, cwd=REPO, check=False, timeout=120)


def _cc_yaml(tmp_path: Path, spec_text: str) -> Path:
    path = tmp_path / "cc.yaml"
    path.write_text("apiVersion: installer.kubesphere.io/v1alpha1\nkind: ClusterConfiguration\n"
                    "metadata: {name: ks-installer, namespace: kubesphere-system}\nspec:\n" + spec_text)
    return path


def _block_map(depth: int, indent: int) -> str:
    return "".join(f"{' ' * (indent + 2 * i)}a:\n" for i in range(depth)).rstrip("\n") + " 1\n"


@pytest.mark.parametrize("spec_text, error", [
    (f"  affinity: {_deep_list(600)}\n", f"{LIST_PATH}: {TOO_DEEP}"),
    ("  affinity:\n" + "".join(f"{' ' * (4 + 2 * i)}-\n" for i in range(600)), f"{LIST_PATH}: {TOO_DEEP}"),
    ("  authentication:\n    oauthOptions:\n" + _block_map(600, 6), f"{MAP_PATH}: {TOO_DEEP}"),
    (f"  affinity: {_deep_list(MAX_DEPTH + 10)}\n", f"{LIST_PATH}: {TOO_DEEP}"),  # composed, refused after
    ("  tolerations: &t [*t]\n", f"tolerations[0][0][0][0][0][0][0]...: {TOO_DEEP}"),  # an alias to itself
], ids=["flow lists", "block lists", "block mappings", "just too deep", "recursive alias"])
def test_plan_refuses_a_deep_file_in_one_line(tmp_path: Path, spec_text: str, error: str) -> None:
    path = _cc_yaml(tmp_path, spec_text)
    proc = plan(path)
    assert proc.returncode == 2 and proc.stdout == ""  # as for any invalid spec
    assert proc.stderr == f"error: {path} is invalid:\n  {error}\n"


def test_plan_accepts_merge_keys(tmp_path: Path) -> None:
    path = _cc_yaml(tmp_path, "  logging: &on\n    enabled: true\n"
                              "  events:\n    <<: *on\n    ruler: {enabled: false, replicas: 2}\n"
                              "  auditing:\n    <<: [*on]\n    enabled: false\n")
    proc = plan(path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"logging", "events"} <= set(out["install"]) and "auditing" in out["unchanged"]


def test_a_merge_key_bomb_is_refused_quickly(tmp_path: Path) -> None:
    text = "  b0: &b0 {" + ", ".join(f"k{i}: {i}" for i in range(10)) + "}\n"
    for level in range(1, 9):  # 10**9 keys once merged
        text += f"  b{level}: &b{level} {{<<: [{', '.join([f'*b{level - 1}'] * 10)}]}}\n"
    proc = plan(_cc_yaml(tmp_path, text))
    # Refused from the parse events, before anything is composed or merged (tests/unit/test_hostile_files.py).
    assert proc.returncode == 2 and "line 9, column 27: too many values: more than 60000 nodes" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("spec_text, where, line", [
    ("  multicluster:\n    clusterRole: host\n    clusterRole: none\n", "spec.multicluster.clusterRole", 7),
    ("  nodeSelector: {a: b}\n  tolerations:\n  - {key: k, key: j}\n", "spec.tolerations[0].key", 7),
    ("  logging: &on {enabled: true}\n  events:\n    <<: *on\n    enabled: false\n    enabled: true\n",
     "spec.events.enabled", 9),
])
def test_a_duplicate_key_names_its_line_and_path(tmp_path: Path, spec_text: str, where: str, line: int) -> None:
    proc = plan(_cc_yaml(tmp_path, spec_text))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"twice ({where})" in proc.stderr and f"line {line}," in proc.stderr


# ---------------------------------------------------------------- legacy keys: validated even when dropped


@pytest.mark.parametrize("changes, error", [
    ({"console": {"port": "abc"}},  # the default cc sets common.core.console: the legacy value is merged away
     'console.port (dropped: common.core.console.port is already set): must be a NodePort (integer 30000-32767); '
     'got string "abc"'),
    ({"common": {**DEFAULT_CC["spec"]["common"], "redisVolumSize": 5}},
     "common.redisVolumSize (dropped: common.redis.volumeSize is already set): must be a Kubernetes quantity such "
     "as 20Gi or 500Mi; got integer 5"),
    ({"kubeedge": {"enabled": "yes"}},
     'kubeedge.enabled (dropped: edgeruntime.kubeedge.enabled is already set): expected a boolean (true or false); '
     'got string "yes"'),
    ({"logging": {"enabled": True, "logsidecarReplicas": "x"}},
     'logging.logsidecarReplicas (dropped: logging.logsidecar.replicas is already set): must be a replica count '
     '(integer 0-100); got string "x"'),
])
def test_a_dropped_legacy_value_is_validated(changes: dict[str, Any], error: str) -> None:
    spec = copy.deepcopy({**DEFAULT_CC["spec"], **changes})  # the case's own dicts stay as they are
    if "logging" in changes:
        spec["logging"]["logsidecar"] = {"enabled": True, "replicas": 2}
    assert [str(e) for e in prepare(spec).errors] == [error]


def test_a_moved_legacy_value_is_named_as_written() -> None:
    spec = copy.deepcopy(DEFAULT_CC["spec"])
    del spec["common"]["core"]["console"]
    spec["console"] = {"port": "abc"}
    assert [str(e) for e in prepare(spec).errors] == [
        'console.port (moved to common.core.console.port): must be a NodePort (integer 30000-32767); got string "abc"']
    spec["console"] = {"port": 30881}
    assert prepare(spec).errors == [] and prepare(spec).spec["common"]["core"]["console"]["port"] == 30881


def test_valid_legacy_values_still_give_way_silently() -> None:
    spec = {**copy.deepcopy(DEFAULT_CC["spec"]), "console": {"port": 30999}}
    prepared = prepare(spec)
    assert prepared.errors == [] and prepared.spec["common"]["core"]["console"]["port"] == 30880


def test_the_default_cc_round_trips_through_the_loaders(tmp_path: Path) -> None:
    text = json.dumps(DEFAULT_CC)
    assert loads_json(text) == DEFAULT_CC == loads_json(text.encode())
    path = tmp_path / "cc.yaml"
    path.write_text(yaml.safe_dump(DEFAULT_CC))
    assert plan(path).returncode == 0


# ---------------------------------------------------------------- the reconcile of a deep cc read from the API


def test_the_reconcile_of_a_deep_cc_is_stalled_invalid_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the hook's full path does with the cc ``ClusterConfigurations.get`` read: Stalled with reason
    InvalidSpec, a warning Event, no module run and nothing stored (the API calls are recorded instead)."""
    from installer.engine import reconcile
    from installer.engine_settings import Settings

    cc = loads_json(_cc_json(f'{{"affinity": {_deep_list(DEEP)}}}'))
    events: list[tuple[str, str]] = []
    patches: list[dict[str, Any]] = []

    class Events:
        def __init__(self, api: Any, cc: dict[str, Any], writes: Any = None) -> None:
            pass

        def warning(self, reason: str, message: str) -> None:
            events.append((reason, message))

    monkeypatch.setattr(reconcile, "CcEvents", Events)
    monkeypatch.setenv("KS_BASE_DIR", str(tmp_path))
    reconciler = reconcile.Reconciler(client.ApiClient(), Settings.from_env())
    monkeypatch.setattr(reconciler.store, "load", lambda: ({}, None))
    monkeypatch.setattr(reconciler.store, "save_spec", lambda spec: pytest.fail("the spec was stored"))
    monkeypatch.setattr(reconciler.ccs, "patch_status", patches.append)
    result = reconciler._run(cc, False, None)
    assert [str(e) for e in result.errors] == [f"{LIST_PATH}: {TOO_DEEP}"] and not result.outcomes
    assert events == [("InvalidSpec", f"nothing was changed: {LIST_PATH}: {TOO_DEEP}")]
    stalled = next(c for p in patches for c in p.get("conditions", []) if c["type"] == "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "InvalidSpec" and TOO_DEEP in stalled["message"]
