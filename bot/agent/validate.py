"""Grounding checks on the model's answer (pure): drop or repair what fails, and say so.

- a cited card must have been returned by a tool in this conversation;
- a category must be a taxonomy id (repaired to the card's category when it is not);
- an evidence line must exist in an analyzed log (`line_at`); a wrong line number is
  repaired when the text is among the lines analyze_log reported;
- a remediation step must point at an existing step of a returned card;
- a probe suggestion must name a known preset.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.agent.answer_model import AgentAnswer, EvidenceRef, RemediationStep, RootCauseClaim
from bot.knowledge.cards import Card

LineLookup = Callable[[str, int], "str | None"]


@dataclass
class Outcome:
    answer: AgentAnswer
    notes: list[str] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def grounded(self) -> bool:
        """Something cited survived: root causes or citations."""
        return bool(self.answer.root_causes or self.answer.citations)


def _norm(text: str) -> str:
    return " ".join(text.split())


def _matches(claimed: str, actual: str) -> bool:
    c, a = _norm(claimed), _norm(actual)
    return bool(c) and (c in a or (len(a) >= 20 and a in c))


def check_evidence(ev: EvidenceRef, line_at: LineLookup,
                   known: Mapping[str, Mapping[str, str]]) -> tuple[EvidenceRef | None, str | None]:
    """The evidence as it stands in the log (maybe repaired), or None, plus a note."""
    actual = line_at(ev.file, ev.line)
    if actual is not None and _matches(ev.text, actual):
        return EvidenceRef(file=ev.file, line=ev.line, text=actual), None
    for file, lines in known.items():
        for ln, text in lines.items():
            if _matches(ev.text, text):
                return (EvidenceRef(file=file, line=int(ln), text=text),
                        f"repaired evidence {ev.file}:{ev.line} to {file}:{ln}")
    return None, f"dropped evidence {ev.file}:{ev.line}: no such line in the analyzed logs"


def _check_root_cause(rc: RootCauseClaim, out: Outcome, cards: Mapping[str, Card],
                      categories: Collection[str], line_at: LineLookup,
                      known: Mapping[str, Mapping[str, str]]) -> RootCauseClaim | None:
    card = cards.get(rc.card)
    if card is None:
        out.notes.append(f"dropped root cause citing card {rc.card!r}: no tool returned it "
                         "in this conversation")
        out.dropped.append({"kind": "root_cause", "card": rc.card, "reason": "card not retrieved"})
        return None
    category = rc.category
    if category not in categories or category not in (card.category, *card.also):
        out.notes.append(f"repaired category {category!r} of {card.id} to {card.category!r}")
        out.dropped.append({"kind": "category", "card": card.id, "value": category})
        category = card.category
    evidence: list[EvidenceRef] = []
    for ev in rc.evidence:
        fixed, note = check_evidence(ev, line_at, known)
        if note:
            out.notes.append(note)
        if fixed is None:
            out.dropped.append({"kind": "evidence", "file": ev.file, "line": ev.line})
        elif all((e.file, e.line) != (fixed.file, fixed.line) for e in evidence):
            evidence.append(fixed)
    confidence = min(1.0, max(0.0, rc.confidence))
    if confidence != rc.confidence:
        out.notes.append(f"clamped confidence of {card.id} to {confidence}")
    return RootCauseClaim(category=category, card=card.id, confidence=confidence,
                          evidence=evidence, why=rc.why)


def validate_answer(answer: AgentAnswer, *, cards: Mapping[str, Card],
                    categories: Collection[str], line_at: LineLookup,
                    known_evidence: Mapping[str, Mapping[str, str]] | None = None,
                    presets: Collection[str] = ()) -> Outcome:
    """Check every claim of `answer` against what tools returned; see the module doc."""
    out = Outcome(answer=AgentAnswer(explanation=answer.explanation))
    known = known_evidence or {}
    root_causes = []
    for rc in answer.root_causes:
        fixed = _check_root_cause(rc, out, cards, categories, line_at, known)
        if fixed is not None and all(r.card != fixed.card for r in root_causes):
            root_causes.append(fixed)
    root_causes.sort(key=lambda r: r.confidence, reverse=True)

    steps: list[RemediationStep] = []
    for st in answer.remediation:
        card = cards.get(st.card)
        if card is None or not 1 <= st.step <= len(card.remediation.en):
            out.notes.append(f"dropped remediation step {st.card}#{st.step}: not a step of a "
                             "card returned in this conversation")
            out.dropped.append({"kind": "remediation", "card": st.card, "step": st.step})
        elif all((s.card, s.step) != (st.card, st.step) for s in steps):
            steps.append(st)
    if not steps and root_causes:
        top = cards[root_causes[0].card]
        steps = [RemediationStep(card=top.id, step=i + 1) for i in range(len(top.remediation.en))]
        if answer.remediation:
            out.notes.append(f"remediation replaced by the steps of card {top.id}")

    citations: list[str] = []
    for cid in [*answer.citations, *(r.card for r in root_causes), *(s.card for s in steps)]:
        if cid not in cards:
            if cid in answer.citations:
                out.notes.append(f"dropped citation {cid!r}: no tool returned it")
                out.dropped.append({"kind": "citation", "card": cid})
        elif cid not in citations:
            citations.append(cid)

    probes = []
    for p in answer.probes:
        if presets and p.preset not in presets:
            out.notes.append(f"dropped probe suggestion {p.preset!r} on {p.node}: unknown preset "
                             f"(known: {', '.join(sorted(presets))})")
            out.dropped.append({"kind": "probe", "preset": p.preset})
        else:
            probes.append(p)
    out.answer = AgentAnswer(explanation=answer.explanation, root_causes=root_causes,
                             remediation=steps, citations=citations, probes=probes)
    return out
