"""The installer's YAML data files are read through JSON copies in $KS_BASE_DIR/cache/data while unchanged."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from installer.data_files import BASE_ENV, load_yaml


def test_a_copy_is_used_until_its_files_content_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BASE_ENV, str(tmp_path / "base"))
    source = tmp_path / "schema.yaml"
    source.write_text("# a comment\ntype: object\nproperties: {port: {type: integer, minimum: 1}}\n")
    expected = {"type": "object", "properties": {"port": {"type": "integer", "minimum": 1}}}
    assert load_yaml(source) == expected
    copy = tmp_path / "base" / "cache" / "data" / "schema.yaml.json"
    saved = json.loads(copy.read_text())
    assert saved["data"] == expected

    copy.write_text(json.dumps({**saved, "data": {"from": "the copy"}}))
    assert load_yaml(source) == {"from": "the copy"}  # the file is not parsed while it is unchanged
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched: the same content
    assert load_yaml(source) == {"from": "the copy"}

    source.write_text(source.read_text().replace("minimum: 1", "minimum: 2"))  # the same size and time
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_yaml(source) == {**expected, "properties": {"port": {"type": "integer", "minimum": 2}}}
    source.write_text("type: string\n")
    assert load_yaml(source) == {"type": "string"} == json.loads(copy.read_text())["data"]

    copy.write_text("{not json")
    assert load_yaml(source) == {"type": "string"}
    assert json.loads(copy.read_text())["data"] == {"type": "string"}


@pytest.mark.parametrize("text, data", [("when: 2024-01-02\n", {"when": dt.date(2024, 1, 2)}),
                                        ("1: one\n", {1: "one"})])
def test_data_json_cannot_hold_is_parsed_each_time(text: str, data: dict[object, object], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "data.yaml"
    source.write_text(text)
    monkeypatch.setenv(BASE_ENV, str(tmp_path / "base"))
    assert load_yaml(source) == data
    assert load_yaml(source) == data
    assert not (tmp_path / "base" / "cache" / "data" / "data.yaml.json").exists()


def test_without_a_base_dir_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "data.yaml"
    source.write_text("a: [1, 2]\n")
    monkeypatch.delenv(BASE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert load_yaml(source) == {"a": [1, 2]}
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["data.yaml"]
