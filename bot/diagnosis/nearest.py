"""Nearest past incidents: which real incidents does this log look like? (pure)

A log is reduced to its *salient lines* (errors, warnings, exceptions, the NCCL lines that
say which transport and interface were used), each normalised so that what changes from
job to job (numbers, hex, addresses, paths, host names) does not count. Every incident of
the corpus is reduced the same way, and so is every card (its example lines, symptoms and
title), so a failure no incident shows yet can still be recognised from the knowledge.
Similarity is cosine over sublinear TF-IDF weights of word unigrams and bigrams; the k
nearest documents then vote for their categories, weighted by similarity. The parameters
(k, the floor, the channel's weight in the diagnosis) are chosen by grouped cross-validation
in `benchmarks/eval_cases.py`.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Protocol

from bot.knowledge.cards import Card
from bot.knowledge.incidents import Incident
from bot.logs.salient import normalise, reports_failure, salient_lines

if TYPE_CHECKING:
    from bot.memory.model import LocalIncident

_WORD = re.compile(r"[a-z_][a-z0-9_]*|\d{1,3}")
_STOP = frozenset((
    "a", "an", "the", "of", "to", "in", "on", "at", "is", "was", "be", "by", "for", "and",
    "or", "it", "this", "that", "with", "as", "from", "are", "not", "if", "has", "have", "had",
    "been", "will", "would", "can", "do", "does", "did", "but", "so", "than", "then", "there",
    "these", "those", "its", "into", "we", "you", "your", "i", "me", "my", "our",
))



def shows_failure(lines: Sequence[str]) -> bool:
    """Whether any of a log's salient lines reports a failure (the gate of the channel)."""
    return any(reports_failure(line) for line in lines)


def terms(lines: Sequence[str], bigrams: bool = True) -> Counter[str]:
    """Unigram (and bigram) counts over normalised lines."""
    out: Counter[str] = Counter()
    for line in lines:
        words = [w for w in _WORD.findall(line) if w not in _STOP]
        out.update(words)
        if bigrams:
            out.update(f"{a} {b}" for a, b in pairwise(words))
    return out


def tfidf(counts: Counter[str], idf: dict[str, float]) -> dict[str, float]:
    """The unit sublinear TF-IDF vector of term counts (terms without an idf left out)."""
    vec = {t: (1.0 + math.log(c)) * idf[t] for t, c in counts.items() if t in idf}
    norm = math.sqrt(sum(w * w for w in vec.values())) or 1.0
    return {t: w / norm for t, w in vec.items()}


@dataclass(frozen=True)
class Doc:
    """What the index compares a log with: a real incident, or a card (its example lines,
    symptoms and title: the knowledge of a failure written from several threads)."""

    id: str
    category: str
    secondary: tuple[str, ...]
    lines: tuple[str, ...]  # salient, normalised
    incident: Incident | None = None
    card: str | None = None
    #: one of the team's own resolved incidents (`bot.memory`)
    local: LocalIncident | None = None

    @property
    def accepted(self) -> frozenset[str]:
        return frozenset({self.category, *self.secondary})


def incident_doc(incident: Incident) -> Doc:
    return Doc(f"incident:{incident.id}", incident.category, tuple(incident.secondary),
               tuple(salient_lines(incident.log.splitlines())), incident=incident)


def card_doc(card: Card) -> Doc:
    text = [*card.examples, *card.symptoms.en, card.title.en]
    lines = tuple(dict.fromkeys(k for k in (normalise(t) for t in text) if k))
    return Doc(f"card:{card.id}", card.category, tuple(card.also), lines, card=card.id)


@dataclass(frozen=True)
class Neighbour:
    doc: Doc
    score: float

    @property
    def incident(self) -> Incident | None:
        return self.doc.incident


def idf_weight(n: int, df: int) -> float:
    """Smoothed inverse document frequency of a term in `df` of `n` documents."""
    return math.log((1 + n) / (1 + df)) + 1.0


class _Vectors:
    """TF-IDF vectors of documents with their postings (term -> (position, weight)): what
    the bundled and the local index share. Subclasses set `docs`, `bigrams` and `idf`, then
    call `_index`."""

    docs: list[Doc]
    bigrams: bool
    idf: dict[str, float]

    def _index(self, counts: Sequence[Counter[str]]) -> None:
        self.vectors = [self._vector(c) for c in counts]
        self._position = {d.id: i for i, d in enumerate(self.docs)}
        self.postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for i, vec in enumerate(self.vectors):
            self._post(i, vec)

    def _post(self, i: int, vec: dict[str, float]) -> None:
        for t, w in vec.items():
            self.postings[t].append((i, w))

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        return tfidf(counts, self.idf)

    def overlap(self, line: str, doc: Doc) -> float:
        """How much one normalised line shares with a document (sum of shared weights)."""
        i = self._position.get(doc.id)
        if i is None:
            return 0.0
        vec = self.vectors[i]
        return sum(vec.get(t, 0.0) for t in terms([line], self.bigrams))


class IncidentIndex(_Vectors):
    """Sublinear TF-IDF vectors of the salient lines of past incidents (and of the cards);
    cosine nearest neighbours."""

    def __init__(self, incidents: Sequence[Incident], cards: Sequence[Card] = (),
                 bigrams: bool = True) -> None:
        self.docs = [*(incident_doc(i) for i in incidents), *(card_doc(c) for c in cards)]
        self.bigrams = bigrams
        counts = [terms(d.lines, bigrams) for d in self.docs]
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        n = max(len(self.docs), 1)
        self.df, self.n = df, n
        self.idf = {t: idf_weight(n, d) for t, d in df.items()}
        self._index(counts)

    def similarities(self, lines: Sequence[str]) -> list[float]:
        """Cosine similarity of a log's salient lines to every document, in index order."""
        query = self._vector(terms(lines, self.bigrams))
        sims = [0.0] * len(self.docs)
        for t, w in query.items():
            for i, dw in self.postings.get(t, ()):
                sims[i] += w * dw
        return sims

    def nearest(self, lines: Sequence[str], k: int = 5,
                exclude: Callable[[Incident], bool] | None = None) -> list[Neighbour]:
        """The k closest documents; `exclude` rules out incidents (never cards). None when no
        line reports a failure: set-up lines alone (which transport, which interface) are
        what every healthy run prints too, so they cannot say which failure this is."""
        if not shows_failure(lines):
            return []
        sims = self.similarities(lines)
        order = sorted(range(len(sims)), key=lambda i: -sims[i])
        out: list[Neighbour] = []
        for i in order:
            if sims[i] <= 0 or len(out) >= k:
                break
            inc = self.docs[i].incident
            if exclude is not None and inc is not None and exclude(inc):
                continue
            out.append(Neighbour(self.docs[i], sims[i]))
        return out


@dataclass(frozen=True)
class VoteParams:
    """How neighbours become category evidence (chosen by cross-validation)."""

    k: int = 8
    floor: float = 0.05  # neighbours below this similarity do not vote
    secondary: float = 0.5  # a neighbour's secondary categories get this share of its vote
    power: float = 1.0  # similarity ** power: closer neighbours count more
    full_at: float = 0.3  # a best similarity at or above this gives the vote its full weight


def category_votes(neighbours: Sequence[Neighbour], params: VoteParams = VoteParams()
                   ) -> dict[str, float]:
    """Each category's share of the similarity-weighted vote of the k nearest (sums to <= 1),
    scaled by how close the best neighbour is."""
    voters = [n for n in neighbours[: params.k] if n.score >= params.floor]
    if not voters:
        return {}
    raw: dict[str, float] = defaultdict(float)
    for n in voters:
        w = n.score ** params.power
        raw[n.doc.category] += w
        for s in n.doc.secondary:
            raw[s] += params.secondary * w
    total = sum(n.score ** params.power * (1 + params.secondary * len(n.doc.secondary))
                for n in voters)
    closeness = min(1.0, voters[0].score / params.full_at)
    return {c: closeness * v / total for c, v in raw.items()}


# -- the team's own incidents -------------------------------------------------------------

#: How a local incident's neighbours become evidence, apart from the corpus's vote: each
#: category's share of the local neighbours' similarity-weighted vote, times `LOCAL_WEIGHT`,
#: at full strength from a similarity of `LOCAL_FULL_AT`. A documented default, not fitted:
#: a resolution of this team's own near-identical log (same library, same cluster) is
#: stronger evidence than a public thread that shares words with it, and the corpus has no
#: local incidents to fit it on (`benchmarks/learning.py` measures it in a prequential
#: replay of the corpus instead).
LOCAL_WEIGHT = 0.9
LOCAL_FULL_AT = 0.5
LOCAL_VOTES = VoteParams(k=5, floor=0.2, full_at=LOCAL_FULL_AT)


def local_doc(incident: LocalIncident, lines: Sequence[str]) -> Doc:
    return Doc(f"local:{incident.id}", incident.category, tuple(incident.secondary),
               tuple(lines), card=None, local=incident)


class LocalIndex(_Vectors):
    """TF-IDF vectors of the team's local incidents, weighted by the document frequencies
    of the bundled index and the local incidents together (so a word the corpus never saw,
    the name of the team's own library, counts fully), compared like the bundled index.
    Built once, then kept current by `add` and `remove` (a change is one incident, not a
    rebuild); the caller rebuilds it when many have changed since (`churn`)."""

    def __init__(self, docs: Sequence[Doc], base: IncidentIndex) -> None:
        self.docs = list(docs)
        self.bigrams = base.bigrams
        counts = [terms(d.lines, self.bigrams) for d in self.docs]
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        n = self.n = base.n + len(self.docs)
        #: positions of removed documents; documents added since the build
        self.dead: set[int] = set()
        self.added = 0
        self.idf = {t: idf_weight(n, base.df.get(t, 0) + d) for t, d in df.items()}
        for t, d in base.df.items():
            self.idf.setdefault(t, idf_weight(n, d))
        self._index(counts)

    @property
    def size(self) -> int:
        return len(self.docs) - len(self.dead)

    @property
    def churn(self) -> float:
        """The share of documents added or removed since the build."""
        return (self.added + len(self.dead)) / max(1, self.size)

    def add(self, docs: Sequence[Doc]) -> None:
        """More documents, weighted with this index's idf (a term it never saw counts as
        the rarest), so nothing else is recomputed."""
        rarest = idf_weight(self.n, 0)
        for d in docs:
            counts = terms(d.lines, self.bigrams)
            for t in counts:
                self.idf.setdefault(t, rarest)
            i = len(self.docs)
            self.docs.append(d)
            self.vectors.append(self._vector(counts))
            self._position[d.id] = i
            self._post(i, self.vectors[i])
        self.added += len(docs)

    def remove(self, ids: Iterable[str]) -> None:
        """Documents that no longer count (forgotten, or about to be replaced)."""
        for doc_id in ids:
            i = self._position.pop(doc_id, None)
            if i is not None:
                self.dead.add(i)

    def nearest(self, lines: Sequence[str], k: int = 5) -> list[Neighbour]:
        if not shows_failure(lines):
            return []
        query = self._vector(terms(lines, self.bigrams))
        sims: dict[int, float] = defaultdict(float)
        for t, w in query.items():
            for i, dw in self.postings.get(t, ()):
                sims[i] += w * dw
        best = sorted(((s, i) for i, s in sims.items() if s > 0 and i not in self.dead),
                      key=lambda t: -t[0])[:k]
        return [Neighbour(self.docs[i], s) for s, i in best]


class NeighbourIndex(Protocol):
    """What the diagnosis asks of an index of past incidents."""

    def nearest(self, lines: Sequence[str], k: int = 5,
                exclude: Callable[[Incident], bool] | None = None) -> list[Neighbour]: ...

    def overlap(self, line: str, doc: Doc) -> float: ...


class WithLocal:
    """The bundled index and the team's local one: the local neighbours first (they have
    their own vote, `local_votes`), then the corpus's."""

    def __init__(self, base: IncidentIndex, local: LocalIndex) -> None:
        self.base, self.local = base, local

    def nearest(self, lines: Sequence[str], k: int = 5,
                exclude: Callable[[Incident], bool] | None = None) -> list[Neighbour]:
        return [*self.local.nearest(lines, LOCAL_VOTES.k), *self.base.nearest(lines, k, exclude)]

    def overlap(self, line: str, doc: Doc) -> float:
        return (self.local if doc.local is not None else self.base).overlap(line, doc)


def split_local(neighbours: Sequence[Neighbour]) -> tuple[list[Neighbour], list[Neighbour]]:
    """(the team's own, the corpus's and cards')."""
    return ([n for n in neighbours if n.doc.local is not None],
            [n for n in neighbours if n.doc.local is None])


def local_votes(neighbours: Sequence[Neighbour], weight: float = LOCAL_WEIGHT
                ) -> dict[str, float]:
    """The team memory's evidence per category (0 without a close local incident)."""
    return {c: weight * v for c, v in category_votes(split_local(neighbours)[0],
                                                     LOCAL_VOTES).items()}
