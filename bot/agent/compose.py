"""A validated `AgentAnswer` -> an `Answer` (plus explanation, notes) (pure).

Remediation text comes from the cited cards, in the requested languages; the model
only chose, ordered and annotated the steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.agent.answer_model import AgentAnswer
from bot.agent.models import ProbeProposal
from bot.answering.answer import card_brief
from bot.answering.contract import (
    Answer,
    ChosenStep,
    DiagnosisOut,
    EvidenceLine,
    LlmUse,
    ProbeRun,
    ProbeSuggestion,
    RootCauseOut,
    SimilarIncident,
    SuspectOut,
    decide_verdict,
    langs_of,
    stated_certainty,
)
from bot.diagnosis.engine import certainty
from bot.knowledge.cards import Card
from bot.knowledge.taxonomy import category


def compose_answer(answer: AgentAnswer, cards: Mapping[str, Card], lang: str = "both", *,
                   suspects: Sequence[SuspectOut] = (), notes: Sequence[str] = (),
                   proposals: Sequence[ProbeProposal] = (),
                   similar_incidents: Sequence[SimilarIncident] = (),
                   probe_results: Sequence[ProbeRun] = (), llm: LlmUse | None = None,
                   thread_id: str | None = None) -> Answer:
    """The `Answer`, built once: with the notes, the similar incidents the agent's log
    analyses found, the probes run this turn, the `llm` field and the thread."""
    langs = langs_of(lang)
    # the agent's answer is grounded in the cards it cites (validated before this)
    # the agent's confidence, for cards it read evidence for, is held to the log's cuts
    # (its lead over its next cause decides whether it stands alone, as in the engine)
    causes = answer.root_causes
    words = [certainty(rc.confidence, {"rule"}, margin=rc.confidence - max(
        (o.confidence for o in causes if o is not rc), default=0.0)) for rc in causes]
    verdict = decide_verdict(words[0] if words else None,
                             logs_given=False, log_failure=False, grounded_question=True)
    root_causes = []
    for rc, word in zip(causes, words, strict=True):
        card = cards[rc.card]
        cat = category(rc.category)
        root_causes.append(RootCauseOut(
            category=rc.category, card=rc.card, confidence=round(rc.confidence, 3),
            # stated as the verdict tells it (likely only when diagnosed)
            certainty=stated_certainty(word, verdict),
            evidence=[EvidenceLine.model_validate(e.model_dump()) for e in rc.evidence],
            category_name={lg: getattr(cat, lg) for lg in langs},
            why=[rc.why] if rc.why else [],
            title={lg: getattr(card.title, lg) for lg in langs},
            remediation={lg: list(getattr(card.remediation, lg)) for lg in langs}))
    steps = [ChosenStep(card=s.card, step=s.step, note=s.note,
                        **{lg: getattr(cards[s.card].remediation, lg)[s.step - 1]
                           for lg in langs})
             for s in answer.remediation]
    top = cards[answer.root_causes[0].card] if answer.root_causes else None
    suggested = [ProbeSuggestion(node=p.node, preset=p.preset, reason=p.reason)
                 for p in answer.probes]
    for prop in proposals:
        if all((s.node, s.preset) != prop.key for s in suggested):
            suggested.append(ProbeSuggestion(node=prop.node, preset=prop.preset))
    for s in suggested:
        s.status = next((p.status for p in proposals if p.key == (s.node, s.preset)),
                        "proposed")
        s.needs_confirmation = s.status == "proposed"
    return Answer(
        verdict=verdict,
        summary=_summary(answer, cards, verdict),
        diagnosis=DiagnosisOut(verdict=verdict, root_causes=root_causes,
                               suspects=list(suspects)),
        remediation={lg: [getattr(s, lg) or "" for s in steps] for lg in langs},
        remediation_steps=steps,
        verify={lg: list(getattr(top.verify, lg)) if top else [] for lg in langs},
        citations=[card_brief(cards[c], lang) for c in answer.citations],
        probes=sorted({p for rc in answer.root_causes[:2] for p in cards[rc.card].probes}),
        suggested_probes=suggested,
        explanation=answer.explanation,
        notes=list(notes),
        similar_incidents=list(similar_incidents),
        probe_results=list(probe_results),
        llm=llm,
        thread_id=thread_id,
    )


def _summary(answer: AgentAnswer, cards: Mapping[str, Card], verdict: str) -> str:
    if answer.root_causes:
        rc = answer.root_causes[0]
        prefix = "Most likely" if verdict == "diagnosed" else "Unclear; weak candidate"  # < 0.3
        return f"{prefix}: {rc.category} ({rc.confidence:.0%}) - {cards[rc.card].title.en}."
    first = answer.explanation.strip().split("\n", 1)[0]
    return first[:300] or "See the cited cards."
