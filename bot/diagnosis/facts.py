"""Answers to deciding questions as evidence, and the question that decides (pure).

The taxonomy (`knowledge/taxonomy.yaml`, `questions`) lists questions whose answers tell
categories apart, each quoting a real thread where the answer decided the cause. An answer
(`--fact container=yes`, a Slack button) supports some categories (a signal of
`FACT_STRENGTH` / sqrt(how many it supports), in the noisy-OR) and rules out others (their
score times `RULE_OUT`).

`deciding_question` picks, for an undecided answer, the unanswered question that best
separates the leading candidates: the one whose answers move the most candidate weight in
different directions (a question that moves every candidate the same way decides nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.knowledge.taxonomy import Deciding, load_questions

FACT_STRENGTH = 0.6
RULE_OUT = 0.35
ASKED_FOR = 0.5
YES = frozenset({"yes", "y", "true", "1", "是", "是的"})
NO = frozenset({"no", "n", "false", "0", "否", "不是"})


class FactError(ValueError):
    """A `--fact` that names no deciding question or no answer of it (one line)."""


@dataclass
class FactEvidence:
    supports: dict[str, tuple[float, str]] = field(default_factory=dict)
    rules_out: dict[str, tuple[float, str]] = field(default_factory=dict)


def normalise_answer(value: str) -> str:
    v = value.strip().lower()
    return "yes" if v in YES else "no" if v in NO else v


def parse_facts(items: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` items -> {question id: answer}; a bad one raises `FactError` naming the
    known questions and answers."""
    known = {q.id: q for q in load_questions()}
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        q = known.get(key)
        if not sep or q is None:
            raise FactError(f"--fact {item!r}: use KEY=VALUE with KEY one of "
                            f"{', '.join(sorted(known))}")
        answer = normalise_answer(value)
        if answer not in q.answers:
            raise FactError(f"--fact {item!r}: {key} takes {' or '.join(q.answers)}")
        out[key] = answer
    return out


def fact_evidence(facts: Mapping[str, str]) -> FactEvidence:
    """What the answered questions say about each category (unknown keys are ignored)."""
    out = FactEvidence()
    by_id = {q.id: q for q in load_questions()}
    for key, value in facts.items():
        q = by_id.get(key)
        implies = q.answers.get(normalise_answer(value)) if q else None
        if q is None or implies is None:
            continue
        said = f"you answered '{q.en}': {normalise_answer(value)}"
        # an answer that fits one cause says more about it than one that fits several
        strength = FACT_STRENGTH / max(1, len(implies.supports)) ** 0.5
        for c in implies.supports:
            out.supports[c] = (round(strength, 3), said)
        for c in implies.rules_out:
            out.rules_out[c] = (RULE_OUT, said)
    return out


def separation(q: Deciding, weights: Mapping[str, float]) -> float:
    """How much candidate weight the answers of `q` move in different directions: for each
    answer, the weight it supports minus the weight it rules out; the spread between the
    answers (0 when every answer moves the candidates alike)."""
    effects = []
    for implies in q.answers.values():
        up = sum(weights.get(c, 0.0) for c in implies.supports)
        down = sum(weights.get(c, 0.0) for c in implies.rules_out)
        effects.append(up - down)
    touched = q.categories() & {c for c, w in weights.items() if w > 0}
    if len(touched) < 1 or not effects:
        return 0.0
    return max(effects) - min(effects)


def deciding_question(candidates: Sequence[tuple[str, float]], answered: Mapping[str, str],
                      questions: Sequence[Deciding] | None = None) -> Deciding | None:
    """The unanswered question that best separates the leading candidates (category,
    confidence), best first; None when no question moves them."""
    weights: dict[str, float] = {}
    for cat, conf in candidates[:3]:
        weights[cat] = max(weights.get(cat, 0.0), conf)
    best: tuple[float, Deciding] | None = None
    for q in questions if questions is not None else load_questions():
        if q.id in answered:
            continue
        # a question the leading symptom calls for counts, at a discount, for its weight
        score = separation(q, weights) + ASKED_FOR * sum(weights.get(c, 0.0)
                                                         for c in q.asked_for)
        if score > 0 and (best is None or score > best[0]):
            best = (score, q)
    return best[1] if best else None


def truthful_answer(q: Deciding, accepted: frozenset[str] | set[str]) -> str | None:
    """The answer a reporter whose cause is one of `accepted` would give, when the question's
    data implies one (an answer supports the cause, or the other answers rule it out);
    None when it does not say (for the benchmark: an answered question, simulated)."""
    for value, implies in q.answers.items():
        if accepted & set(implies.supports):
            return value
    ruling = [v for v, implies in q.answers.items() if accepted & set(implies.rules_out)]
    rest = [v for v in q.answers if v not in ruling]
    return rest[0] if ruling and len(rest) == 1 else None
