"""``plan --desired FILE`` with a file that is not a spec: a device, a FIFO, a directory, too large a file, an alias or
merge bomb, a huge key or many errors. Each is refused at once with a short message, never read whole, built or
printed in full."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml

from installer import cli
from installer.cli import MAX_COMPOSED, MAX_DESIRED_BYTES, main
from installer.config.validate import MAX_ERRORS


def refusal(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["plan", *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(("path", "what"), [("/dev/zero", "a device"), ("/", "a directory")])
def test_a_device_or_directory_is_refused(capsys: pytest.CaptureFixture[str], path: str, what: str) -> None:
    assert refusal(capsys, "--desired", path) == f"error: {path}: cannot read YAML: {what}; give a regular file\n"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "cc.yaml"
    os.mkfifo(fifo)
    done = threading.Event()
    threading.Timer(30, lambda: done.is_set() or os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)).start()
    try:
        assert "a FIFO; give a regular file" in refusal(capsys, "--desired", str(fifo))
    finally:
        done.set()


def test_a_file_larger_than_the_limit_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "cc.yaml"
    big.write_text("spec: {}\n" + "#" * MAX_DESIRED_BYTES)
    assert refusal(capsys, "--desired", str(big)).endswith(f"larger than {MAX_DESIRED_BYTES} bytes\n")


def _bomb(merge: bool) -> str:
    """Ten keys, then nine levels of ten aliases of the level below: 10^10 values once built."""
    lines = ["kind: ClusterConfiguration", "spec:", "  x0: &x0 {" + ", ".join(f"k{j}: {j}" for j in range(10)) + "}"]
    for i in range(1, 10):
        if merge:
            lines += [f"  x{i}: &x{i}", f"    <<: *x{i - 1}", *(f"    m{j}: *x{i - 1}" for j in range(10))]
        else:
            lines.append(f"  x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [_bomb(merge=True), _bomb(merge=False), "spec: [" + ",".join(["1"] * 500_000) + "]"],
                         ids=["merge-bomb", "alias-bomb", "flow-list"])
def test_alias_merge_bombs_and_long_lists_are_refused_before_anything_is_composed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    def composed(*_: object) -> None:
        raise AssertionError("the strict loader composed a node")

    monkeypatch.setattr(cli._StrictLoader, "compose_node", composed)
    path = tmp_path / "cc.yaml"
    path.write_text(text)
    assert f"too many values: more than {MAX_COMPOSED} nodes" in refusal(capsys, "--desired", str(path))


def test_a_huge_key_and_many_errors_print_a_bounded_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "key.yaml"
    key.write_text("kind: ClusterConfiguration\nspec:\n  ? " + "k" * 900_000 + "\n  : 1\n")
    err = refusal(capsys, "--desired", str(key))
    assert "is too long a field name: 900000 characters" in err and len(err) < 1000
    many = tmp_path / "many.yaml"
    many.write_text(yaml.safe_dump({"kind": "ClusterConfiguration",
                                    "spec": {f"unknown{i}-" + "u" * 5000: 1 for i in range(120)}}))
    err = refusal(capsys, "--desired", str(many))
    assert f"... and {120 - MAX_ERRORS} more errors" in err and len(err) < 40_000
