"""Hybrid search over the cards: BM25 + dense (chromadb) + the log's signatures, fused by
weighted reciprocal rank fusion (see `bot.retrieval.fusion`). Public entry: `search()`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.answering.contract import ChannelHit, RetrievalHit
from bot.config import Settings
from bot.diagnosis.engine import Diagnosis
from bot.knowledge.cards import Card
from bot.retrieval.fusion import DEFAULT_WEIGHTS, Ranked, rrf
from bot.retrieval.sparse import SparseIndex

#: Candidates each channel contributes before fusion.
DEPTH = 20


@dataclass
class Hit:
    card: str
    category: str
    score: float
    why: list[str] = field(default_factory=list)
    channels: dict[str, ChannelHit] = field(default_factory=dict)

    def out(self) -> RetrievalHit:
        """The hit as the answer lists it (score rounded)."""
        return RetrievalHit(card=self.card, category=self.category, score=round(self.score, 4),
                            why=self.why, channels=self.channels)


class Retriever:
    """The loaded channels for one set of cards and one settings object."""

    def __init__(self, settings: Settings, cards: Sequence[Card], progress: bool = True,
                 client: Any = None) -> None:
        from bot.retrieval.dense import make_embedder
        from bot.retrieval.index import ensure_index

        self.cards = {c.id: c for c in cards}
        self.sparse = SparseIndex(cards, settings.index_path)
        self.embedder = make_embedder(settings.embedding_model)
        self.build = ensure_index(settings, cards, self.embedder, client=client, progress=progress)
        self.collection = self.build.collection

    # -- channels -------------------------------------------------------------------------
    def bm25(self, query: str, k: int = DEPTH) -> list[Ranked]:
        return [Ranked(h.card, h.score, "terms " + ", ".join(h.terms[:6]))
                for h in self.sparse.search(query, k)]

    def dense(self, query: str, k: int = DEPTH) -> list[Ranked]:
        vector = self.embedder.queries([query])[0]
        n = min(self.collection.count(), 2 * k)
        if n == 0:
            return []
        res = self.collection.query(query_embeddings=[[float(x) for x in vector]], n_results=n,
                                    include=["metadatas", "distances"])
        best: dict[str, Ranked] = {}
        for meta, dist in zip(res["metadatas"][0], res["distances"][0], strict=True):
            card, sim = meta["card"], 1.0 - float(dist)
            if card in self.cards and card not in best:
                best[card] = Ranked(card, sim, f"similar to its {meta['lang']} text ({sim:.2f})")
        return list(best.values())[:k]

    @staticmethod
    def signature(diagnosis: Diagnosis | None) -> list[Ranked]:
        if diagnosis is None:
            return []
        out = [Ranked(c, s, f"log matched its signature(s) (score {s:.2f})")
               for c, s in sorted(diagnosis.card_scores.items(), key=lambda kv: -kv[1])]
        for rc in diagnosis.root_causes:
            if rc.card and rc.card not in diagnosis.card_scores:
                reason = rc.why[0] if rc.why else rc.category
                out.append(Ranked(rc.card, rc.score, f"log evidence: {reason}"))
        return out

    # -- fused ------------------------------------------------------------------------------
    def search(self, query: str, k: int = 5, log_diagnosis: Diagnosis | None = None,
               weights: dict[str, float] | None = None) -> list[Hit]:
        rankings = {"bm25": self.bm25(query), "dense": self.dense(query),
                    "signature": self.signature(log_diagnosis)}
        fused = rrf(rankings, weights or DEFAULT_WEIGHTS)
        return [Hit(f.card, self.cards[f.card].category, f.score, f.why, f.channels)
                for f in fused[:k] if f.card in self.cards]


_CACHE: dict[tuple[Any, ...], Retriever] = {}
#: One Retriever per index: threads (Slack workers) that ask at once wait for the first to
#: open chromadb and build the index instead of each opening it (chromadb's client is not
#: safe to create concurrently for one path).
_CACHE_LOCK = threading.Lock()


def get_retriever(settings: Settings | None = None, cards: Sequence[Card] | None = None,
                  progress: bool = True) -> Retriever:
    """A cached Retriever; the index is built (with a progress bar) on first use."""
    from bot.answering.knowledge import bundled_cards
    from bot.config import load_settings

    settings = settings or load_settings()
    cards = list(cards if cards is not None else bundled_cards())
    key = (str(settings.index_path), settings.embedding_model, settings.chroma_host,
           settings.chroma_port, tuple(sorted(c.id for c in cards)), id(cards[0]) if cards else 0)
    found = _CACHE.get(key)
    if found is None:
        with _CACHE_LOCK:
            found = _CACHE.get(key)
            if found is None:
                found = _CACHE[key] = Retriever(settings, cards, progress=progress)
    return found


def search(query: str, k: int = 5, log_diagnosis: Diagnosis | None = None, *,
           settings: Settings | None = None) -> list[Hit]:
    """The k best cards for a question (and, optionally, the diagnosis of its log)."""
    return get_retriever(settings).search(query, k, log_diagnosis)
