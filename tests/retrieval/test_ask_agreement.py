"""A question alone (no log) is `possible` only when its two readings agree: the cards it
reads like, and the past threads whose questions resemble it (`engine.grounded`, kind
`asked`). Real question, real index, real past questions (the thread's own left out)."""

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
