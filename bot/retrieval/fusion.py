"""Weighted reciprocal rank fusion (pure).

Each channel (bm25, dense, signature) gives a ranked list of cards. A card's fused score is

    score(card) = sum over channels c of  w_c / (K + rank_c(card))      (rank from 1)

RRF uses ranks, not raw scores, so channels with incomparable scales (BM25 sums, cosine
similarities compressed into 0.76-0.92, signature noisy-OR) combine without calibration;
the weights say how much each channel is trusted. K (10, smaller than the usual 60 because
the corpus has under a hundred cards) sets how fast credit falls with rank.

The weights were chosen on `benchmarks/queries/realistic.jsonl` (wording from real threads)
with two-fold cross-validation: BM25 is the stronger channel in this domain (error names,
variables and codes are decisive), so it weighs 3x dense; tuned on either half, a BM25-heavy
weighting (3:1, K 10-20) beat both equal weights and BM25 alone on the other half (MRR). The
log's signatures weigh most: a log's own evidence outranks the wording of the question.
Each fused hit keeps, per channel, its rank, raw score and the reason it ranked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.answering.contract import ChannelHit

K = 10
DEFAULT_WEIGHTS: dict[str, float] = {"bm25": 3.0, "dense": 1.0, "signature": 4.0}


@dataclass(frozen=True)
class Ranked:
    """One card in one channel's ranking."""

    card: str
    score: float
    reason: str = ""


@dataclass
class Fused:
    card: str
    score: float
    channels: dict[str, ChannelHit] = field(default_factory=dict)

    @property
    def why(self) -> list[str]:
        return [f"{name} #{info.rank}: {info.reason}" if info.reason
                else f"{name} #{info.rank}" for name, info in self.channels.items()]


def rrf(rankings: Mapping[str, Sequence[Ranked]], weights: Mapping[str, float] | None = None,
        k: int = K) -> list[Fused]:
    """Fuse ranked lists (best first) into one, best first; ties broken by card id."""
    weights = weights or DEFAULT_WEIGHTS
    fused: dict[str, Fused] = {}
    for channel, ranked in rankings.items():
        w = weights.get(channel, 1.0)
        if w <= 0:
            continue
        seen: set[str] = set()
        for item in ranked:
            if item.card in seen:
                continue
            seen.add(item.card)
            rank = len(seen)
            hit = fused.setdefault(item.card, Fused(item.card, 0.0))
            hit.score += w / (k + rank)
            hit.channels[channel] = ChannelHit(rank=rank, score=round(item.score, 4),
                                               reason=item.reason)
    return sorted(fused.values(), key=lambda f: (-f.score, f.card))
