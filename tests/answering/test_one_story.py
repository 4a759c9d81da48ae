"""Certainty and verdict tell one story (issue 25): `likely` is said of a cause exactly when
the answer is `diagnosed`, a log that shows no failure makes every candidate unclear, and a
cause that is not a diagnosis is at most `possible`: in `--json`, the CLI text and Slack
alike, as they all read the one `Answer` (pure, real logs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agent.answer_model import AgentAnswer
from bot.agent.compose import compose_answer
from bot.answering.answer import build_answer
from bot.answering.contract import stated_certainty
from bot.answering.knowledge import bundled_cards
from bot.diagnosis.engine import diagnose
from bot.knowledge.incidents import dev_and_sealed
from bot.logs.analyze import analyzer_for
from bot.logs.sources import text_source

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("word", "verdict", "said"), [
    ("likely", "diagnosed", "likely"), ("likely", "unknown", "possible"),
    ("possible", "unknown", "possible"), ("weak", "unknown", "weak"),
    ("likely", "no_evidence", "weak"), ("possible", "no_evidence", "weak"),
    (None, "error", None),
])
def test_the_stated_word_follows_the_verdict(word: str | None, verdict: str,
                                             said: str | None) -> None:
    assert stated_certainty(word, verdict) == said


def test_a_likely_cause_that_is_not_a_diagnosis_is_said_possible_everywhere() -> None:
    """The bundled sample's crash is `likely` and `diagnosed`; the same diagnosis under a
    verdict that does not call it one (as a question alone gets when it points at no one
    card) states `possible` in the JSON and in the headline, never `likely`."""
    cards = list(bundled_cards())
    log = (ROOT / "examples" / "sample-8rank-oom.log").read_text(encoding="utf-8")
    report = analyzer_for(cards).analyze([text_source("sample.log", log)])
    dx = diagnose(report, cards)
    assert dx.verdict == "diagnosed" and dx.root_causes[0].certainty == "likely"
    decided = build_answer(dx, cards, report, "en")
    assert decided.root_causes[0].certainty == "likely"
    undecided = build_answer(dx, cards, report, "en", verdict="unknown")
    assert undecided.root_causes[0].certainty == "possible"
    assert '"likely"' not in undecided.to_json()
    assert not undecided.headline["en"].lower().startswith("likely")
    quiet = build_answer(dx, cards, report, "en", verdict="no_evidence")
    assert {rc.certainty for rc in quiet.root_causes} == {"weak"}


def test_every_dev_answer_tells_one_story() -> None:
    """`analyze` on every dev incident: `diagnosed` exactly when the leading cause is said
    `likely`; `no_evidence` only with unclear candidates; no cause but the first is likely."""
    cards = list(bundled_cards())
    analyzer = analyzer_for(cards)
    dev, _ = dev_and_sealed(None)
    assert len(dev) > 50
    for case in dev:
        report = analyzer.analyze([text_source(f"{case.id}.log", case.log)])
        answer = build_answer(diagnose(report, cards), cards, report, "en")
        words = [rc.certainty for rc in answer.root_causes]
        assert (answer.verdict == "diagnosed") == (words[:1] == ["likely"]), case.id
        assert "likely" not in words[1:], case.id
        if answer.verdict == "no_evidence":
            assert set(words) <= {"weak"}, case.id


def test_an_llm_answer_states_each_cause_with_its_word() -> None:
    """The agent's answer carries a certainty per cause (it had none: every renderer read
    "unclear" even for a diagnosis): its leading cause likely when diagnosed, the rest not."""
    cards = {c.id: c for c in bundled_cards()}
    oom = "cuda-oom-on-one-rank-others-timeout"
    other = next(c for c in cards.values() if c.category != cards[oom].category)
    claim = AgentAnswer.model_validate({"explanation": "rank 5 ran out of memory",
                                        "root_causes": [
                                            {"category": cards[oom].category, "card": oom,
                                             "confidence": 0.9},
                                            {"category": other.category, "card": other.id,
                                             "confidence": 0.1}]})
    answer = compose_answer(claim, cards, "en")
    assert answer.verdict == "diagnosed"
    assert [rc.certainty for rc in answer.root_causes] == ["likely", "weak"]
    close = claim.model_copy(update={"root_causes": [
        claim.root_causes[0].model_copy(update={"confidence": 0.5}),
        claim.root_causes[1].model_copy(update={"confidence": 0.45})]})
    unsure = compose_answer(close, cards, "en")
    assert unsure.verdict == "unknown" and "likely" not in {
        rc.certainty for rc in unsure.root_causes}
