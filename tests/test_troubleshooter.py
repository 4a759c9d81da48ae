"""One verdict rule, one Troubleshooter: each set of logs analysed once, LLM or not decided
once, every answer an `Answer` that validates against the published schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bot.answering.contract import Answer, answer_schema, decide_verdict
from bot.answering.troubleshooter import Question, Troubleshooter, make_analyzer
from bot.config import load_settings
from tests.conftest import ROOT

SAMPLE = ROOT / "examples" / "sample-8rank-oom.log"


@pytest.mark.parametrize(("top", "logs", "failure", "grounded", "verdict"), [
    ("likely", True, False, True, "no_evidence"),  # a question cannot decide a healthy log
    ("likely", True, True, False, "diagnosed"),
    ("possible", True, True, True, "unknown"),     # a candidate, not a diagnosis
    ("weak", True, True, True, "unknown"),
    (None, True, True, False, "unknown"),
    ("likely", False, False, True, "diagnosed"),   # a question that points at one card
    ("likely", False, False, False, "unknown"),    # a vague question
])
def test_the_verdict_rule(top: str | None, logs: bool, failure: bool, grounded: bool,
                          verdict: str) -> None:
    assert decide_verdict(top, logs_given=logs, log_failure=failure,
                          grounded_question=grounded) == verdict


class Counting:
    def __init__(self, settings: Any) -> None:
        self.inner, self.calls = make_analyzer(settings), 0

    def __call__(self, paths: Any) -> Any:
        self.calls += 1
        return self.inner(paths)


def test_a_question_about_an_evidence_free_log_is_not_a_diagnosis(tmp_path: Path) -> None:
    quiet = tmp_path / "quiet.log"
    quiet.write_text("step 1 loss 2.31\nstep 2 loss 2.29\nstep 3 loss 2.27\n", encoding="utf-8")
    ts = Troubleshooter(load_settings(data_dir=tmp_path))
    answer = ts.answer(Question("what happened? log attached", (str(quiet),)))
    assert answer.verdict == "no_evidence"
    assert not answer.remediation.get("en")  # no steps for a cause the log does not show
    jsonschema.validate(json.loads(answer.to_json()), answer_schema())


def test_follow_ups_and_the_llm_fallback_reuse_one_analysis(tmp_path: Path) -> None:
    """The deterministic path and the agent's fallback (an unreachable LLM) both answer
    from the analysis the Troubleshooter made once for these logs."""
    pytest.importorskip("langchain_openai")
    settings = load_settings(data_dir=tmp_path, llm_provider="openai", llm_model="m",
                             llm_base_url="http://127.0.0.1:9/v1", llm_timeout_s=2)
    counting = Counting(settings)
    ts = Troubleshooter(settings, analyzer=counting)
    assert ts.uses_llm
    q = Question("why did it hang?", (str(SAMPLE),), thread_id="t1")
    first = ts.answer(q)
    assert first.llm is not None and first.llm.used is False
    assert any(n.startswith("LLM unavailable") for n in first.notes)
    assert first.root_causes[0].category == "rank_crashed"
    second = ts.answer(Question("and what should I check first?", q.logs, thread_id="t1"))
    assert second.root_causes[0].category == "rank_crashed"
    assert counting.calls == 1
    assert ts.has_analysis(q)


def test_without_an_llm_no_log_asks_for_one(tmp_path: Path) -> None:
    ts = Troubleshooter(load_settings(data_dir=tmp_path))
    assert not ts.uses_llm
    answer = ts.answer(Question(""))
    assert answer.verdict == "no_evidence" and "crash log" in answer.text
    assert Answer.model_validate_json(answer.to_json()) == answer


def test_a_hung_or_unreachable_llm_trips_the_breaker(tmp_path: Path) -> None:
    """After three outages in a row the LLM is skipped for the cool-down: answers come at
    once, deterministic, saying why; after the cool-down it is tried again."""
    pytest.importorskip("langchain_openai")
    from bot.agent import respond as real_respond
    from bot.answering.troubleshooter import CircuitBreaker

    calls: list[str] = []

    def respond(question: str, **kw: Any) -> Answer:
        calls.append(question)
        return real_respond(question, **kw)

    settings = load_settings(data_dir=tmp_path, llm_provider="openai", llm_model="m",
                             llm_base_url="http://127.0.0.1:9/v1", llm_timeout_s=2)
    now = [0.0]
    ts = Troubleshooter(settings, respond=respond)
    ts.breaker = CircuitBreaker(threshold=3, cooldown_s=60, clock=lambda: now[0])
    for i in range(3):
        out = ts.answer(Question(f"why {i}?", (str(SAMPLE),)))
        assert any(n.startswith("LLM unavailable") for n in out.notes)
    assert len(calls) == 3
    skipped = ts.answer(Question("and now?", (str(SAMPLE),)))
    assert len(calls) == 3 and skipped.root_causes[0].category == "rank_crashed"
    assert any(n.startswith("LLM skipped for 60 s") for n in skipped.notes)
    now[0] = 61.0
    ts.answer(Question("again?", (str(SAMPLE),)))
    assert len(calls) == 4
