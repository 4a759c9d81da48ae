"""Signatures measured on real logs: how often each card signature fires where it should (pure).

Every signature runs over every incident log of the corpus and over the healthy logs. A hit
on an incident whose accepted categories include the card's category (or one of its `also`)
is a true positive; a hit on any other incident or on a healthy log is a false positive.
Decisive signatures (weight >= 0.5) must be precise, have a real positive and stay off
healthy logs; `ncclbot knowledge signatures` prints the table and fails when one is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.knowledge.cards import Card
from bot.knowledge.incidents import Incident

MIN_PRECISION = 0.9


@dataclass
class SignatureStats:
    card: str
    name: str
    weight: float
    true_pos: list[str] = field(default_factory=list)  # incident ids
    false_pos: list[str] = field(default_factory=list)  # incident ids or "healthy:<name>"
    example_tp: str | None = None
    example_fp: str | None = None

    @property
    def precision(self) -> float | None:
        fired = len(self.true_pos) + len(self.false_pos)
        return len(self.true_pos) / fired if fired else None

    @property
    def decisive(self) -> bool:
        return self.weight >= 0.5

    def problems(self) -> list[str]:
        """Why a decisive signature fails the bar (empty when it passes, or is not decisive)."""
        if not self.decisive:
            return []
        out = []
        healthy = [f for f in self.false_pos if f.startswith("healthy:")]
        if healthy:
            out.append(f"fires on healthy log {healthy[0].split(':', 1)[1]}")
        if not self.true_pos:
            out.append("no real positive in the incident corpus")
        p = self.precision
        if p is not None and self.true_pos and p < MIN_PRECISION:
            out.append(f"precision {p:.2f} < {MIN_PRECISION} "
                       f"({len(self.false_pos)} false positive(s), e.g. {self.false_pos[0]})")
        return out


def measure(cards: Sequence[Card], incidents: Sequence[Incident],
            healthy: Sequence[tuple[str, str]]) -> list[SignatureStats]:
    """Run every signature over the corpus and the healthy logs ((name, text) pairs)."""
    logs = [(i.id, i.accepted, i.log.splitlines()) for i in incidents]
    healthy_lines = [(name, text.splitlines()) for name, text in healthy]
    out = []
    for card in cards:
        own = {card.category, *card.also}
        for sig in card.signatures:
            st = SignatureStats(card.id, sig.name, sig.weight)
            for iid, accepted, lines in logs:
                line = next((x for x in lines if sig.regex.search(x)), None)
                if line is None:
                    continue
                if accepted & own:
                    st.true_pos.append(iid)
                    st.example_tp = st.example_tp or line.strip()
                else:
                    st.false_pos.append(iid)
                    st.example_fp = st.example_fp or line.strip()
            for name, lines in healthy_lines:
                line = next((x for x in lines if sig.regex.search(x)), None)
                if line is not None:
                    st.false_pos.append(f"healthy:{name}")
                    st.example_fp = st.example_fp or line.strip()
            out.append(st)
    return out
