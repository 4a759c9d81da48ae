"""The pure grounding checks."""

from __future__ import annotations

from bot.agent.answer_model import AgentAnswer, AnswerParseError, parse_answer
from bot.agent.validate import validate_answer
from bot.knowledge.taxonomy import category_ids
from bot.service import bundled_cards
from tests.agent_llm.conftest import OOM_CARD

LINES = {("train.log", 7): "[rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory."}


def _check(raw: dict, seen=(OOM_CARD,), known=None):
    cards = {c.id: c for c in bundled_cards() if c.id in seen}
    return validate_answer(AgentAnswer.model_validate(raw), cards=cards,
                           categories=category_ids(),
                           line_at=lambda f, n: LINES.get((f, n)),
                           known_evidence=known or {}, presets={"quick"})


def test_valid_claim_kept_and_evidence_text_taken_from_the_log():
    out = _check({"explanation": "x", "root_causes": [{
        "category": "rank_crashed", "card": OOM_CARD, "confidence": 0.9,
        "evidence": [{"file": "train.log", "line": 7, "text": "OutOfMemoryError"}]}]})
    assert out.notes == [] and out.grounded
    ev = out.answer.root_causes[0].evidence[0]
    assert ev.text == LINES[("train.log", 7)]
    assert out.answer.citations == [OOM_CARD]
    assert len(out.answer.remediation) >= 3  # the card's steps when the model gave none


def test_wrong_line_number_repaired_from_known_evidence():
    known = {"train.log": {"7": LINES[("train.log", 7)]}}
    out = _check({"explanation": "", "root_causes": [{
        "category": "rank_crashed", "card": OOM_CARD, "confidence": 0.5,
        "evidence": [{"file": "train.log", "line": 3, "text": "CUDA out of memory"}]}]},
        known=known)
    assert out.answer.root_causes[0].evidence[0].line == 7
    assert out.notes == ["repaired evidence train.log:3 to train.log:7"]


def test_unseen_card_unknown_probe_and_bad_step_dropped():
    out = _check({"explanation": "", "root_causes": [
        {"category": "rank_crashed", "card": "nccl-socket-ifname-matches-no-interface",
         "confidence": 0.9}],
        "remediation": [{"card": OOM_CARD, "step": 0}],
        "probes": [{"node": "n1", "preset": "burn-it-down"}, {"node": "n1", "preset": "quick"}]})
    assert not out.grounded
    assert [p.preset for p in out.answer.probes] == ["quick"]
    assert len(out.notes) == 3


def test_parse_answer_tolerates_fences_but_not_garbage():
    fenced = 'Here:\n```json\n{"explanation": "ok", "citations": ["a"]}\n```'
    assert parse_answer(fenced).citations == ["a"]
    for bad in ("", "no json here", '{"root_causes": 5}', "[1, 2]"):
        try:
            parse_answer(bad)
        except AnswerParseError:
            continue
        raise AssertionError(f"accepted {bad!r}")
