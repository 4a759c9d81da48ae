"""A question alone (no log) is `possible` only when its two readings put the same family
first: the card it reads most like, and the past threads whose questions resemble it
(`engine.grounded`, kind `asked`, `ask.agree`). Real question, real index, real past questions (the thread's own left out)."""

from __future__ import annotations

from bot.answering.ask import DISTINCTIVE_DF, compose_diagnosis
from bot.answering.knowledge import bundled_cards
from bot.diagnosis.asked import QuestionIndex
from bot.diagnosis.evaluate import thread_of
from bot.knowledge.incidents import dev_and_sealed
from bot.retrieval.search import Retriever


def test_a_question_alone_needs_both_readings_to_be_possible(retriever: Retriever) -> None:
    cards = list(bundled_cards())
    dev, _ = dev_and_sealed(None)
    case = next(i for i in dev if i.id == "pipedream-torchrun-nccl-bus-error-docker")
    assert case.question
    hits = retriever.search(case.question, 8, None)
    distinctive = retriever.sparse.distinctive(DISTINCTIVE_DF)

    alone = compose_diagnosis(case.question, cards, hits, distinctive=distinctive)
    assert alone.diagnosis.root_causes
    assert all(rc.certainty != "possible" and "asked" not in rc.kinds
               for rc in alone.diagnosis.root_causes)

    past = QuestionIndex([i for i in dev if thread_of(i) != thread_of(case)])
    both = compose_diagnosis(case.question, cards, hits, distinctive=distinctive,
                             asked=past.nearest(case.question, 8))
    top = both.diagnosis.root_causes[0]
    assert top.category == "shm_ipc_container" and "asked" in top.kinds
    assert top.certainty in {"possible", "likely"}
    assert (both.verdict == "diagnosed") == (top.certainty == "likely")


def test_the_readings_agree_only_when_both_put_the_family_first() -> None:
    """`agree` (pure): the card the question reads most like and the past threads' vote must
    put the same family first; the past threads' first family alone is not agreement."""
    from bot.answering.ask import agree
    from bot.diagnosis.rules import Signal

    def sig(category: str, strength: float) -> Signal:
        return Signal(category, strength, "the question")

    read = [sig("shm_ipc_container", 0.45), sig("network_interface", 0.27)]
    assert agree(read, [sig("shm_ipc_container", 0.9), sig("rank_crashed", 0.2)]) \
        == "shm_ipc_container"
    # the past threads lean to the family the cards put second: no agreement
    assert agree(read, [sig("network_interface", 0.9), sig("shm_ipc_container", 0.5)]) is None
    assert agree(read, []) is None and agree([], read) is None
