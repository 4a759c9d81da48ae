"""Recorded real fault runs (tests/fixtures/faults): torchrun's log folder, its summary and
the Flight Recorder dumps of a gloo job, read together."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.logs.analyze import rank_of_file
from bot.logs.sources import expand_inputs
from bot.service import analyze_sources
from tests.conftest import ROOT

RUNS = ROOT / "tests" / "fixtures" / "faults"


def test_a_file_in_torchruns_log_dir_belongs_to_its_rank() -> None:
    assert rank_of_file("logs/abc_x1/attempt_0/3/stderr.log") == 3
    assert rank_of_file("job.zip:run/attempt_12/0/stdout.log") == 0
    assert rank_of_file("logs/3/stderr.log") is None
    assert rank_of_file("stderr.log") is None
    report, _ = analyze_sources(expand_inputs([str(RUNS / "sleep-rank1")]))
    timed_out = sorted(t.rank for t in report.timeouts if t.rank is not None)
    assert timed_out == [0, 2, 3]  # gloo's own timeouts, each from its rank's file
    assert all("attempt_0/" in t.ev.file for t in report.timeouts)


def test_the_rank_that_never_reached_the_collective_is_the_straggler() -> None:
    _, d = analyze_sources(expand_inputs([str(RUNS / "sleep-rank1")]))
    assert d.root_causes[0].category == "straggler_or_imbalance"
    assert d.suspects[0].rank == 1
    assert "left no Flight Recorder dump" in d.suspects[0].reason
    # torchrun's "first observed failure" timed out itself: it is named, as a victim
    first = next(s for s in d.suspects if "first observed failure" in s.reason)
    assert first.rank != 1 and "waiting for another rank" in first.reason


def test_without_the_dumps_the_silent_rank_is_still_the_suspect(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUNS / "sleep-rank1", run)
    shutil.rmtree(run / "dumps")
    _, d = analyze_sources(expand_inputs([str(run)]))
    assert d.root_causes[0].category == "straggler_or_imbalance"
    assert d.suspects[0].rank == 1


def test_the_rank_that_could_not_reach_the_store_is_the_culprit() -> None:
    _, d = analyze_sources(expand_inputs([str(RUNS / "wrong_master-rank1")]))
    assert d.root_causes[0].category == "rendezvous_failure"
    assert d.suspects[0].rank == 1
    assert "could not connect to the store at 10.255.255.1" in d.suspects[0].reason
