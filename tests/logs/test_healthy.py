"""Real logs of jobs that ran fine (knowledge/healthy/): no alarm (issues 25 and 29).

The strongest property that holds today, for every healthy log:
- no card signature fires, no failure fact, no cross-rank timeout/mismatch/lag/crash;
- `analyze`: never `diagnosed`, every candidate weak; `no_evidence`, except (a) where the only
  signal is the hang rule's inference from silence (NCCL's set-up lines and then nothing,
  which an excerpt of a healthy run shows just like a hang), or (b) where a line of the log
  reads like a failure but is a warning the job survived: then `unknown`, all weak;
- `ask "is anything wrong here?"` (en, zh): no cause `likely`.
Two stronger properties wait on the engine, which still counts a signal inferred from
silence (`Signal.from_silence`) as failure evidence when it decides the verdict: every log
without a failure line gets `no_evidence` from `analyze` and from `ask` (xfail, strict: they
start passing, and must then lose the marker, once it does not).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from bot.answering.analysis import analyze_sources
from bot.answering.contract import Answer
from bot.diagnosis.engine import Diagnosis
from bot.diagnosis.rules import RULES, hang_rule
from bot.logs.model import INFO_KINDS, LogReport
from bot.logs.sources import expand_inputs
from tests.conftest import ROOT

HEALTHY = sorted((ROOT / "knowledge" / "healthy").glob("*.log"))
QUESTIONS = ("is anything wrong here?", "这个日志有问题吗？")
SILENCE = "the engine counts the hang rule's inference from silence as failure evidence"


@cache
def _analyze(path: Path) -> tuple[LogReport, Diagnosis]:
    return analyze_sources(expand_inputs([str(path)]))


def test_there_are_healthy_logs() -> None:
    assert len(HEALTHY) >= 25


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.stem)
def test_healthy_log_raises_no_alarm(path: Path) -> None:
    report, diag = _analyze(path)
    assert not report.signatures, [h.card + "/" + h.signature for h in report.signatures.values()]
    assert not {k: n for k, n in report.counts.items() if n and k not in INFO_KINDS}
    cr = diag.crossrank
    assert not (cr.timeout_ranks or cr.mismatches or cr.lagging or cr.crashed_ranks)
    assert diag.verdict != "diagnosed"
    assert all(c.certainty == "weak" for c in diag.root_causes), [
        (c.category, c.confidence) for c in diag.root_causes]
    fired = [s for rule in RULES for s in rule(report, cr)]
    if diag.verdict == "no_evidence":
        return
    assert diag.verdict == "unknown"
    if report.shows_failure:  # (b) a warning line: no rule, only resemblance to incidents
        assert not fired
    else:  # (a) only the inference from silence; the nearest-incident channel is silent
        assert fired and all(s.from_silence for s in fired)
        assert {r.__name__ for r in RULES if r(report, cr)} == {hang_rule.__name__}
        assert not diag.neighbours


@pytest.mark.xfail(strict=True, reason=SILENCE)
def test_a_log_without_a_failure_line_is_no_evidence() -> None:
    verdicts = {p.name: _analyze(p)[1].verdict for p in HEALTHY
                if not _analyze(p)[0].shows_failure}
    assert {n: v for n, v in verdicts.items() if v != "no_evidence"} == {}


@cache
def _ask(question: str, path: Path) -> Answer:
    from bot.answering.troubleshooter import Question, Troubleshooter
    from bot.config import load_settings

    return Troubleshooter(load_settings(None)).answer(
        Question(question, (str(path),), lang="auto"), strict=True, llm=False)


@pytest.mark.parametrize("question", QUESTIONS)
def test_healthy_log_with_a_question_is_never_likely(question: str) -> None:
    pytest.importorskip("bm25s", reason="`ask` needs the retrieval extra")
    likely = {p.name: [c.category for c in _ask(question, p).diagnosis.root_causes
                       if c.certainty == "likely"] for p in HEALTHY}
    assert {n: c for n, c in likely.items() if c} == {}


@pytest.mark.xfail(strict=True, reason=SILENCE)
@pytest.mark.parametrize("question", QUESTIONS)
def test_a_log_without_a_failure_line_with_a_question_is_no_evidence(question: str) -> None:
    pytest.importorskip("bm25s", reason="`ask` needs the retrieval extra")
    verdicts = {p.name: _ask(question, p).verdict for p in HEALTHY
                if not _analyze(p)[0].shows_failure}
    assert {n: v for n, v in verdicts.items() if v != "no_evidence"} == {}


def test_the_nearest_incident_channel_needs_a_failure_line() -> None:
    from bot.answering.knowledge import bundled_index

    index = bundled_index()
    setup = [k for p in HEALTHY if not _analyze(p)[0].shows_failure
             for k in _analyze(p)[0].salient.lines()]
    assert setup and index.nearest(setup, k=5) == []
    # the same lines with one real failure line (a DETAIL mismatch, ProcessGroupWrapper.cpp)
    failing = [*setup, "runtimeerror: detected mismatch between collectives on ranks. rank is "
               "running collective: collectivefingerprint(sequencenumber=, optype=allreduce)"]
    assert index.nearest(failing, k=5)
