"""The suite's per-test time budget (tests/conftest.py): over the ceiling fails unless marked slow with a reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def test_ceiling_fails_slow_tests_unless_marked_with_a_reason(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_timed="""
        import time, pytest

        def test_quick():
            pass

        def test_over():
            time.sleep(0.6)

        @pytest.mark.slow(reason="installs every module")
        def test_over_but_allowed():
            time.sleep(0.6)

        @pytest.mark.slow
        def test_marked_without_reason():
            pass
    """)
    monkeypatch.setenv("KS_TEST_CEILING", "0.3")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(CONFTEST.parents[1] / "hack"), str(CONFTEST.parent)]))
    monkeypatch.setenv("KS_TEST_ZYGOTE", "0")  # no engine run here
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*over the suite's 0.3s ceiling*", "*marked slow without a reason*"])
    assert "test_over_but_allowed FAILED" not in result.stdout.str()
