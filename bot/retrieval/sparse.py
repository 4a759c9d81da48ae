"""BM25 over the cards (bm25s): one document per card, both languages plus its example lines.

Cheap enough (a few ms for 100 cards) to build in memory at load; nothing is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.knowledge.cards import Card
from bot.retrieval.tokenize import tokenize


def card_document(card: Card) -> str:
    """What BM25 sees of a card: prose in both languages, examples, signature names."""
    extra = [card.id.replace("-", " "), *(s.name.replace("-", " ") for s in card.signatures),
             *card.verify.en, *card.verify.zh, *card.versions]
    return card.text("both") + "\n" + "\n".join(extra)


@dataclass
class SparseHit:
    card: str
    score: float
    terms: list[str]


class SparseIndex:
    """A BM25 model over card documents, queried with `search`."""

    def __init__(self, cards: Sequence[Card]) -> None:
        import bm25s

        self.ids = [c.id for c in cards]
        docs = [tokenize(card_document(c)) for c in cards]
        self._terms = [set(d) for d in docs]
        self._bm25 = bm25s.BM25()
        self._bm25.index(docs, show_progress=False)

    def search(self, query: str, k: int = 10) -> list[SparseHit]:
        tokens = tokenize(query)
        if not tokens or not self.ids:
            return []
        scores = self._bm25.get_scores(tokens)
        order = sorted(range(len(self.ids)), key=lambda i: -float(scores[i]))[:k]
        qset = list(dict.fromkeys(tokens))
        return [SparseHit(self.ids[i], float(scores[i]), [t for t in qset if t in self._terms[i]])
                for i in order if scores[i] > 0]

    def distinctive(self, max_df: int = 3) -> set[str]:
        """Terms that occur in at most `max_df` cards (error names, codes, variables)."""
        df: dict[str, int] = {}
        for terms in self._terms:
            for t in terms:
                df[t] = df.get(t, 0) + 1
        return {t for t, n in df.items() if n <= max_df}
