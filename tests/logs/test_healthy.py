"""Real logs of jobs that ran fine (knowledge/healthy/): no alarm (issues 25 and 29).

The strongest property that holds today, for every healthy log:
- no card signature fires, no failure fact, no cross-rank timeout/mismatch/lag/crash;
- `analyze`: never `diagnosed`, every candidate weak; `no_evidence`, except where a line of
  the log reads like a failure but is a warning the job survived: then `unknown`, all weak;
- every log without a failure line gets `no_evidence` from `analyze` and from `ask` (en, zh):
  the hang rule's inference from silence (NCCL's set-up lines and then nothing, which an
  excerpt of a healthy run shows just like a hang) is not failure evidence by itself;
- `ask "is anything wrong here?"` (en, zh): no cause `likely`.
The same silence beside a question that says the job hangs is evidence of a hang: a real
hang incident's log stays `unknown` with its candidates (not `no_evidence`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from bot.answering.analysis import analyze_sources
from bot.answering.contract import Answer
from bot.diagnosis.engine import Diagnosis, reports_hang
from bot.diagnosis.rules import RULES
from bot.logs.model import INFO_KINDS, LogReport
from bot.logs.sources import expand_inputs
from tests.conftest import ROOT

HEALTHY = sorted((ROOT / "knowledge" / "healthy").glob("*.log"))
QUESTIONS = ("is anything wrong here?", "这个日志有问题吗？")


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
        # no signal, or only the inference from silence; the nearest-incident channel is silent
        assert all(s.from_silence for s in fired) and diag.silence_only == bool(fired)
        return
    # a warning line the job survived: no rule, only resemblance to incidents
    assert diag.verdict == "unknown" and report.shows_failure and not fired


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


@pytest.mark.parametrize("question", QUESTIONS)
def test_a_log_without_a_failure_line_with_a_question_is_no_evidence(question: str) -> None:
    pytest.importorskip("bm25s", reason="`ask` needs the retrieval extra")
    verdicts = {p.name: _ask(question, p).verdict for p in HEALTHY
                if not _analyze(p)[0].shows_failure}
    assert {n: v for n, v in verdicts.items() if v != "no_evidence"} == {}


def test_how_people_say_a_job_hangs() -> None:
    for said in ("it hangs after this", "stalls forever at 0%", "the job is stuck",
                 "all_reduce_perf froze", "训练卡住了", "程序卡在这里不动了", "NCCL 死锁"):
        assert reports_hang(said), said
    for said in (*QUESTIONS, "why did this change?", "it crashed with an OOM", "运行报错了"):
        assert not reports_hang(said), said


#: a real hang (https://github.com/NVIDIA/nccl/issues/104, knowledge/incidents): nccl-tests printed
#: its devices and results header, then nothing; "stalls forever" is the reporter's word
HANG_INCIDENT = ROOT / "knowledge" / "incidents" / "nccl-m40-allreduce-stall-acs.yaml"


@pytest.mark.parametrize(("question", "verdict"), [
    ("The all-reduce test prints the header and then stalls forever. Any advice?", "unknown"),
    ("这个测试打印完表头就卡住了，怎么回事？", "unknown"),
    (QUESTIONS[0], "no_evidence"),
])
def test_silence_is_a_hang_when_the_question_says_so(tmp_path: Path, question: str,
                                                     verdict: str) -> None:
    pytest.importorskip("bm25s", reason="`ask` needs the retrieval extra")
    import yaml

    from bot.answering.troubleshooter import Question, Troubleshooter
    from bot.config import load_settings

    log = tmp_path / "allreduce.log"
    log.write_text(yaml.safe_load(HANG_INCIDENT.read_text(encoding="utf-8"))["log"],
                   encoding="utf-8")
    report, diag = analyze_sources(expand_inputs([str(log)]))
    assert not report.shows_failure and diag.silence_only and diag.verdict == "no_evidence"
    answer = Troubleshooter(load_settings(None)).answer(
        Question(question, (str(log),), lang="auto"), strict=True, llm=False)
    assert answer.verdict == verdict
    assert answer.diagnosis.root_causes  # the candidates are listed either way
    assert all(c.certainty != "likely" for c in answer.diagnosis.root_causes)


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
