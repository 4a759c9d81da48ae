"""The fault-injection harness (benchmarks/faults) on real faults: a rank raising, a rank
asleep past the process-group timeout."""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor
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


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both faulty jobs, run at the same time (each mostly waits: for its process group's
    timeout, its sleeping rank, torchrun's teardown): fault -> the job's folder."""
    pytest.importorskip("torch")
    sc = _scorecard()
    tmp = tmp_path_factory.mktemp("faults")
    jobs = {"exception": 1, "sleep": 2}  # sleep on rank 2: not a scorecard position
    with ThreadPoolExecutor(len(jobs)) as pool:
        done = {f: pool.submit(sc.run_job, f, r, tmp / f) for f, r in jobs.items()}
        return {f: d.result() for f, d in done.items()}


def test_an_exception_on_rank_1_is_a_crash_of_rank_1(runs: dict[str, Path]) -> None:
    sc = _scorecard()
    where = runs["exception"]
    assert sorted(p.name for p in (where / "dumps").iterdir())  # the ranks' dumps
    assert "injected failure on rank 1" in "".join(
        p.read_text() for p in (where / "logs").rglob("*.log"))
    category_ok, culprit_ok, top, suspect = sc.judge(where, "exception", 1)
    assert (category_ok, culprit_ok) == (True, True), (top, suspect)


def test_a_rank_asleep_past_the_timeout_is_the_straggler(runs: dict[str, Path]) -> None:
    sc = _scorecard()
    category_ok, culprit_ok, top, suspect = sc.judge(runs["sleep"], "sleep", 2)
    assert (category_ok, culprit_ok) == (True, True), (top, suspect)
