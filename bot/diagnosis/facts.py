"""Answers to deciding questions as evidence, and the question that decides (pure).

The taxonomy (`knowledge/taxonomy.yaml`, `questions`) lists questions whose answers tell
categories apart, each quoting a real thread where the answer decided the cause. An answer
(`--fact container=yes`, a Slack button) supports some categories (a signal of
`FACT_STRENGTH` / sqrt(how many it supports), in the noisy-OR) and rules out others (their
score times `RULE_OUT`).

`deciding_question` picks, for an undecided answer, the unanswered question that best
separates the leading candidates: the one whose answer is expected to say the most about
which of them is the cause (expected information, bits); a question that moves every
candidate the same way decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import log2

from bot.knowledge.taxonomy import Deciding, load_questions

FACT_STRENGTH = 0.6
RULE_OUT = 0.35
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


#: How likely a reporter whose cause is `c` gives an answer that supports `c` (the other
#: answers share the rest); an answer that rules `c` out is given with the complement; an
#: answer that says nothing of `c` is as likely as any other.
SAYS = 0.9
#: a question the leading symptom calls for (`Deciding.asked_for`): the categories its answers
#: support, unlisted, are candidates too (a timeout that does not say why may hide a topology
#: or network fault), with this share of the weight of the symptoms that call for it
HIDDEN = 0.5


def answer_likelihood(q: Deciding, answer: str, category: str) -> float:
    """P(answer | the cause is `category`) under the question's data (`SAYS`)."""
    n = len(q.answers)
    said = [a for a, implies in q.answers.items() if category in implies.supports]
    if said:
        return SAYS if answer in said else (1 - SAYS) / max(1, n - len(said))
    ruled = [a for a, implies in q.answers.items() if category in implies.rules_out]
    if ruled and len(ruled) < n:
        return (1 - SAYS) if answer in ruled else SAYS / (n - len(ruled))
    return 1 / n


def _entropy(weights: Sequence[float]) -> float:
    total = sum(weights)
    return -sum(w / total * log2(w / total) for w in weights if w > 0) if total > 0 else 0.0


def information(q: Deciding, weights: Mapping[str, float]) -> float:
    """The expected information (bits) an answer to `q` gives about which of the candidates
    (category -> weight) is the cause: the entropy of the candidates less its expectation
    over the answers (Bayes with `answer_likelihood`). The categories the question supports
    join the candidates when a listed one calls for it (`HIDDEN`). 0 when no answer moves
    the candidates apart, e.g. one that supports every leading candidate alike."""
    prior = {c: w for c, w in weights.items() if w > 0}
    calls = sum(prior.get(c, 0.0) for c in q.asked_for)
    if calls > 0:
        hidden = {c for implies in q.answers.values() for c in implies.supports} - set(prior)
        for c in hidden:
            prior[c] = HIDDEN * calls / len(hidden)
    if len(prior) < 2:
        return 0.0
    expected = 0.0
    for answer in q.answers:
        joint = [w * answer_likelihood(q, answer, c) for c, w in prior.items()]
        expected += sum(joint) / sum(prior.values()) * _entropy(joint)
    return max(0.0, _entropy(list(prior.values())) - expected)


def deciding_question(candidates: Sequence[tuple[str, float]], answered: Mapping[str, str],
                      questions: Sequence[Deciding] | None = None) -> Deciding | None:
    """The unanswered question whose answer tells the leading candidates (category,
    confidence; best first, the first three count) apart best (`information`); None when
    no question moves them apart. A lone candidate is weighed against the chance that it is
    not the cause (its complement), so a question that confirms or rules it out is asked."""
    weights: dict[str, float] = {}
    for cat, conf in candidates[:3]:
        weights[cat] = max(weights.get(cat, 0.0), conf)
    if len(weights) == 1:
        weights[""] = max(0.0, 1.0 - next(iter(weights.values())))  # "" : none of the listed causes
    best: tuple[float, Deciding] | None = None
    for q in questions if questions is not None else load_questions():
        if q.id in answered:
            continue
        score = information(q, weights)
        if score > 1e-9 and (best is None or score > best[0]):
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
