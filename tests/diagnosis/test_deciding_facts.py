"""The question that decides, on the annotated corpus (`benchmarks/deciding.py`): a question
answered with what the reporter stated never turns a right top-1 wrong, and it helps. Floors
sit at or a little below the figures the benchmark prints (dev, grouped CV); the sealed set is
never read by tests."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from benchmarks.deciding import CaseRun, Summary, run_case, run_split, summarize
from bot.answering.knowledge import bundled_cards
from bot.diagnosis.engine import Diagnosis, diagnose
from bot.diagnosis.evaluate import analyze_incidents, fold_of
from bot.diagnosis.nearest import IncidentIndex
from bot.knowledge.incidents import Incident, load_incidents, load_sealed
from bot.knowledge.taxonomy import load_questions


@lru_cache(maxsize=1)
def dev() -> list[Incident]:
    sealed = load_sealed()
    ids = set(sealed.ids) if sealed else set()
    return [i for i in load_incidents() if i.id not in ids]


@lru_cache(maxsize=1)
def dev_cv() -> tuple[Summary, tuple[CaseRun, ...]]:
    corpus, cards, questions = dev(), list(bundled_cards()), load_questions()
    reports = analyze_incidents(corpus, cards)
    runs: list[CaseRun] = []
    for f in range(5):
        test = [i for i in corpus if fold_of(i, 5) == f]
        train = [i for i in corpus if fold_of(i, 5) != f]
        runs += run_split(test, train, reports, cards, questions)
    return summarize(runs, questions), tuple(runs)


def test_one_answered_question_helps_and_never_turns_a_right_answer_wrong() -> None:
    s, runs = dev_cv()
    # 2026-11-29: 75 -> 77 of 121; asked 71, answerable 19; every fact answered 25 -> 29 of 47
    # 2026-11-29 (stop 18, 138 dev): 86 -> 91; every fact answered 29 -> 33 of 49 (1 right->wrong)
    assert s.cases == len(dev()) and s.right_to_wrong == 0
    assert s.top1_after >= s.top1_before + 2
    # 2026-11-29 (stop 19, 171 dev): 113 -> 118; asked 81, answered 14 (0.17). The 33 incidents
    # added in stop 19 state few of the facts asked (11 annotated, by the quote rule); with them
    # left out the share is 13/76, so the floor follows what reporters say, not the picker.
    assert s.answered <= s.asked <= s.undecided and s.answerable >= 0.15
    assert s.top1_before <= s.top1_after <= s.oracle
    # Every stated fact answered at once may reorder causes it supports equally: with 166
    # incidents, paddlefleetx's fewer_gpus=yes ties four categories at 0.21 and the tie falls
    # on the wrong one. A `diagnosed` answer is never lost, and the facts help on balance.
    assert s.stated["right_diagnosis_lost"] == 0
    assert s.stated["right->wrong"] < s.stated["wrong->right"]
    assert s.stated["top1_after"] > s.stated["top1_before"]
    # a question is asked only of an undecided answer, and answered only from annotations
    facts = {i.id: i.answered for i in dev()}
    for r in runs:
        assert r.asked is None or r.undecided
        assert r.answer == (facts[r.id].get(r.asked) if r.asked else None)
        assert r.answer is not None or r.after == r.before


def test_the_answer_is_evidence_in_the_same_ranking() -> None:
    """One incident end to end: its log says only that NCCL failed; its reporter said the
    same job runs on one machine; the system asks exactly that, and the answer decides."""
    corpus, cards = dev(), list(bundled_cards())
    case = next(i for i in corpus if i.id == "deepspeed-pdsh-wrong-socket-ifname-eno1")
    assert case.answered["fewer_gpus"] == "yes"
    train = [i for i in corpus if fold_of(i, 5) != fold_of(case, 5)]
    [run] = run_split([case], train, analyze_incidents([case], cards), cards, load_questions())
    assert run.undecided and run.asked == "fewer_gpus" and run.answer == "yes"
    assert (run.before, run.after) == (False, True)
    # without the annotation the same case is asked the same question and stays as it was
    bare = case.model_copy(update={"facts": {}})
    report = analyze_incidents([bare], cards)[bare.id]
    index = IncidentIndex(train, cards)
    base = diagnose(report, cards, neighbours=index.nearest(report.salient.lines(), k=12))

    def rediagnose(facts: Mapping[str, str]) -> tuple[Diagnosis, str]:
        d = diagnose(report, cards, neighbours=base.neighbours, facts=facts)
        return d, d.verdict

    again = run_case(bare, base, base.verdict, rediagnose, load_questions())
    assert again.asked == "fewer_gpus" and again.answer is None and again.after == again.before
