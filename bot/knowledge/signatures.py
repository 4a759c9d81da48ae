"""Signatures measured on real logs: how often each card signature fires where it should (pure).

Every signature runs over every incident log of the corpus and over the healthy logs. A hit
on an incident whose accepted categories include the card's category (or one of its `also`)
is a true positive; a hit on any other incident or on a healthy log is a false positive.
A signature's real positive is a true positive or a `proof` (the format string it matches,
quoted from a pinned source). No signature may fire on a healthy log (a line every good run
prints tells nothing); decisive ones (weight >= 0.5) must also have a real positive and be
precise. `ncclbot knowledge signatures` prints the table and fails when one is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.knowledge.cards import Card
from bot.knowledge.incidents import Incident

MIN_PRECISION = 0.9
#: Below this precision a signature is counted as imprecise in the summary (not a failure).
REPORT_PRECISION = 0.95


@dataclass
class SignatureStats:
    card: str
    name: str
    weight: float
    true_pos: list[str] = field(default_factory=list)  # incident ids
    false_pos: list[str] = field(default_factory=list)  # incident ids or "healthy:<name>"
    example_tp: str | None = None
    example_fp: str | None = None
    proofs: int = 0  # quoted format strings (card `proof`)

    @property
    def precision(self) -> float | None:
        fired = len(self.true_pos) + len(self.false_pos)
        return len(self.true_pos) / fired if fired else None

    @property
    def decisive(self) -> bool:
        return self.weight >= 0.5

    @property
    def healthy_hits(self) -> list[str]:
        """The healthy logs it fires on (names)."""
        return [f.split(":", 1)[1] for f in self.false_pos if f.startswith("healthy:")]

    @property
    def has_positive(self) -> bool:
        return bool(self.true_pos) or self.proofs > 0

    def problems(self) -> list[str]:
        """Why a signature fails the bar (empty when it passes)."""
        out = []
        healthy = self.healthy_hits
        if healthy:
            more = f" (+{len(healthy) - 1} more)" if len(healthy) > 1 else ""
            out.append(f"fires on healthy log {healthy[0]}{more}")
        if not self.decisive:
            return out
        if not self.has_positive:
            out.append("no real positive (no incident of its card's category, no proof)")
        p = self.precision
        if p is not None and self.true_pos and p < MIN_PRECISION:
            out.append(f"precision {p:.2f} < {MIN_PRECISION} "
                       f"({len(self.false_pos)} false positive(s), e.g. {self.false_pos[0]})")
        return out


@dataclass(frozen=True)
class Summary:
    """The counts the signature report leads with."""

    signatures: int
    never_fire: int  # on no incident at all
    only_other_causes: int  # fires, but never on its own category
    imprecise: int  # precision < REPORT_PRECISION
    healthy_false_positives: int  # signatures firing on at least one healthy log
    without_positive: int  # neither a true positive nor a proof
    proven_by_source: int  # no true positive, but a quoted format string
    failing: int

    def line(self) -> str:
        return (f"{self.signatures} signatures: {self.never_fire} fire on no incident, "
                f"{self.only_other_causes} only on other causes, {self.imprecise} below "
                f"{REPORT_PRECISION} precision, {self.healthy_false_positives} fire on a healthy "
                f"log, {self.without_positive} without a real positive "
                f"({self.proven_by_source} proven by a source format string only), "
                f"{self.failing} failing")


def summarize(stats: Sequence[SignatureStats]) -> Summary:
    def incident_fp(s: SignatureStats) -> list[str]:
        return [f for f in s.false_pos if not f.startswith("healthy:")]

    return Summary(
        signatures=len(stats),
        never_fire=sum(1 for s in stats if not s.true_pos and not incident_fp(s)),
        only_other_causes=sum(1 for s in stats if not s.true_pos and incident_fp(s)),
        imprecise=sum(1 for s in stats
                      if s.precision is not None and s.precision < REPORT_PRECISION),
        healthy_false_positives=sum(1 for s in stats if s.healthy_hits),
        without_positive=sum(1 for s in stats if not s.has_positive),
        proven_by_source=sum(1 for s in stats if not s.true_pos and s.proofs),
        failing=sum(1 for s in stats if s.problems()),
    )


def measure(cards: Sequence[Card], incidents: Sequence[Incident],
            healthy: Sequence[tuple[str, str]]) -> list[SignatureStats]:
    """Run every signature over the corpus and the healthy logs ((name, text) pairs)."""
    logs = [(i.id, i.accepted, i.log.splitlines()) for i in incidents]
    healthy_lines = [(name, text.splitlines()) for name, text in healthy]
    out = []
    for card in cards:
        own = {card.category, *card.also}
        for sig in card.signatures:
            st = SignatureStats(card.id, sig.name, sig.weight, proofs=len(sig.proof))
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
