"""The fault-injection harness (benchmarks/faults) on real faults: a rank raising, a rank
asleep past the process-group timeout."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _scorecard():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "scorecard", ROOT / "benchmarks" / "faults" / "scorecard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_exception_on_rank_1_is_a_crash_of_rank_1(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    sc = _scorecard()
    where = sc.run_job("exception", 1, tmp_path / "run")
    assert sorted(p.name for p in (where / "dumps").iterdir())  # the ranks' dumps
    assert "injected failure on rank 1" in "".join(
        p.read_text() for p in (where / "logs").rglob("*.log"))
    category_ok, culprit_ok, top, suspect = sc.judge(where, "exception", 1)
    assert (category_ok, culprit_ok) == (True, True), (top, suspect)


def test_a_rank_asleep_past_the_timeout_is_the_straggler(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    sc = _scorecard()
    where = sc.run_job("sleep", 2, tmp_path / "run")  # rank 2: not a scorecard position
    category_ok, culprit_ok, top, suspect = sc.judge(where, "sleep", 2)
    assert (category_ok, culprit_ok) == (True, True), (top, suspect)
