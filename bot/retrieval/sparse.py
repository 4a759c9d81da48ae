"""BM25 over the cards (bm25s): one document per card, both languages plus its example lines.

The model is built in memory at load (a few ms); tokenizing the cards (~0.5 s, mostly jieba)
is cached in `bm25-tokens.json` next to the index, keyed by a hash of the card text, the
tokenizer version and the Chinese dictionary, so a warm start never segments a card again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.knowledge.cards import Card
from bot.retrieval.tokenize import TOKENIZER_VERSION, ZH_WORDS, tokenize

TOKEN_CACHE = "bm25-tokens.json"


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

    def __init__(self, cards: Sequence[Card], cache_dir: Path | None = None) -> None:
        import bm25s

        self.ids = [c.id for c in cards]
        docs = tokenized_documents([card_document(c) for c in cards], cache_dir)
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


def corpus_digest(texts: Sequence[str]) -> str:
    h = hashlib.sha256(f"tokenizer={TOKENIZER_VERSION}\n".encode())
    h.update(hashlib.sha256(ZH_WORDS.read_bytes()).digest())
    for t in texts:
        h.update(t.encode() + b"\0")
    return h.hexdigest()


def tokenized_documents(texts: Sequence[str], cache_dir: Path | None) -> list[list[str]]:
    """The tokens of each text, from the cache in `cache_dir` when it is current."""
    if cache_dir is None:
        return [tokenize(t) for t in texts]
    path, digest = Path(cache_dir) / TOKEN_CACHE, corpus_digest(texts)
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("digest") == digest and len(cached.get("docs", [])) == len(texts):
            docs: list[list[str]] = cached["docs"]
            return docs
    except (OSError, ValueError):
        pass  # absent or unreadable: tokenize and (try to) store
    docs = [tokenize(t) for t in texts]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"digest": digest, "docs": docs}, ensure_ascii=False),
                       encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only index dir: tokenize on every start instead
    return docs
