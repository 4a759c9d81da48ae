"""Ranking root causes: card signatures + structural rules -> a `Diagnosis` (pure).

Scoring, in short:
- a card's signature score is the noisy-OR of the weights of its distinct signatures
  that fired: 1 - prod(1 - w);
- a category's score is the noisy-OR of its best card's signature score (and 0.6 x
  that of cards listing it under `also`) and the strengths of the rule signals for it;
- causal order: when a rank crashed first, the timeout categories (which describe
  the other ranks' symptom, not the cause) are halved unless a card says otherwise;
- confidence = score x (0.6 + 0.4 x score / sum of scores), so a lone strong cause
  reads higher than one of several.
Below 0.3 nothing is claimed: the verdict is "unknown" and says what to attach.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.diagnosis.rules import TIMEOUT_CATEGORIES, Signal, signals
from bot.knowledge.cards import Card
from bot.logs.crossrank import CrossRank, Suspect, analyze_ranks
from bot.logs.model import Evidence, LogReport

UNKNOWN_BELOW = 0.3
SHOW_AT_LEAST = 0.12
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass
class RootCause:
    category: str
    card: str | None
    confidence: float
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    why: list[str] = field(default_factory=list)


@dataclass
class Diagnosis:
    root_causes: list[RootCause]
    suspects: list[Suspect]
    crossrank: CrossRank
    verdict: str  # "diagnosed" | "unknown" | "no_evidence"
    card_scores: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def noisy_or(values: Sequence[float]) -> float:
    p = 1.0
    for v in values:
        p *= 1.0 - max(0.0, min(1.0, v))
    return 1.0 - p


def card_signature_scores(report: LogReport) -> dict[str, float]:
    per_card: dict[str, list[float]] = defaultdict(list)
    for hit in report.signatures.values():
        per_card[hit.card].append(hit.weight)
    return {card: noisy_or(ws) for card, ws in per_card.items()}


def _tokens(text: str) -> set[str]:
    return {t.lower() for t in _TOKEN.findall(text)}


def pick_card(
    category: str,
    cards: Sequence[Card],
    card_scores: dict[str, float],
    evidence: Sequence[Evidence],
) -> Card | None:
    """The card of a category that best explains the evidence."""
    members = [c for c in cards if c.category == category] or [
        c for c in cards if category in c.also
    ]
    if not members:
        return None
    scored = [c for c in members if card_scores.get(c.id)]
    if scored:
        return max(scored, key=lambda c: card_scores[c.id])
    words = _tokens(" ".join(e.text for e in evidence))
    if not words:
        return members[0]
    return max(members, key=lambda c: (len(words & _tokens(c.text("en"))), -len(c.id)))


def diagnose(report: LogReport, cards: Sequence[Card], extra: Sequence[Signal] = ()) -> Diagnosis:
    cr = analyze_ranks(report)
    sigs = [*signals(report, cr), *extra]
    card_scores = card_signature_scores(report)
    by_id = {c.id: c for c in cards}

    parts: dict[str, list[float]] = defaultdict(list)
    why: dict[str, list[str]] = defaultdict(list)
    evidence: dict[str, list[Evidence]] = defaultdict(list)
    best_card_score: dict[str, float] = defaultdict(float)
    for cid, score in card_scores.items():
        card = by_id.get(cid)
        if card is None:
            continue
        best_card_score[card.category] = max(best_card_score[card.category], score)
        for other in card.also:
            best_card_score[other] = max(best_card_score[other], 0.6 * score)
    for category, score in best_card_score.items():
        parts[category].append(score)
    for s in sigs:
        parts[s.category].append(s.strength)
        if s.reason not in why[s.category]:
            why[s.category].append(s.reason)
        evidence[s.category].extend(s.evidence)

    scores = {c: noisy_or(v) for c, v in parts.items()}
    crashed = scores.get("rank_crashed", 0.0)
    if crashed >= 0.6:
        for c in TIMEOUT_CATEGORIES:
            if c in scores and best_card_score.get(c, 0.0) < 0.5:
                scores[c] *= 0.5

    total = sum(scores.values()) or 1.0
    causes: list[RootCause] = []
    for category, score in sorted(scores.items(), key=lambda kv: -kv[1]):
        if score < SHOW_AT_LEAST:
            continue
        card = pick_card(category, cards, card_scores, evidence[category])
        entries = [(card, score)]
        if card is not None and card_scores.get(card.id):
            # A second card of the same category whose decisive signatures also fired.
            runner_up = [c for c in cards if c.category == category and c.id != card.id
                         and card_scores.get(c.id, 0.0) >= 0.5]
            if runner_up:
                alt = max(runner_up, key=lambda c: card_scores[c.id])
                entries.append((alt, score * 0.9 * card_scores[alt.id] / card_scores[card.id]))
        for chosen, entry_score in entries:
            causes.append(_cause(category, chosen, entry_score, total, report, evidence[category],
                                 why[category]))
    causes.sort(key=lambda c: -c.score)
    causes = causes[:5]

    if not report.evidence_found and not sigs:
        verdict = "no_evidence"
    elif not causes or causes[0].score < UNKNOWN_BELOW:
        verdict = "unknown"
    else:
        verdict = "diagnosed"
    return Diagnosis(causes, cr.suspects, cr, verdict, card_scores)


def _cause(category: str, card: Card | None, score: float, total: float, report: LogReport,
           evidence: list[Evidence], reasons: list[str]) -> RootCause:
    card_evidence: list[Evidence] = []
    why = list(reasons)
    if card is not None:
        for hit in report.signatures.values():
            if hit.card == card.id:
                card_evidence.extend(hit.evidence[:2])
                why.insert(0, f"matched signature '{hit.signature}' of card {card.id}")
    confidence = score * (0.6 + 0.4 * score / total)
    return RootCause(category, card.id if card else None, round(min(confidence, 1.0), 2),
                     round(score, 3), _dedupe([*card_evidence, *evidence])[:5], why[:6])


def _dedupe(items: list[Evidence]) -> list[Evidence]:
    seen, out = set(), []
    for e in items:
        key = (e.file, e.line)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out
