"""Measuring the diagnosis on real incidents, honestly: grouped cross-validation (pure).

A case counts at top-1 when the first root cause's category is one the incident accepts
(its category or a secondary id), at top-3 when any of the first three is. The nearest-
incident channel never sees the case's own thread: folds are drawn by thread (every
incident of one source URL in one fold), and the index a case is ranked with is built
from the other folds only. `nested_cv` also chooses the fusion settings inside each
training split, so its figure is what tuned settings do on threads they never saw.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product

from bot.diagnosis.engine import (
    CLOSE,
    GROUPS,
    UNCALIBRATED,
    Alone,
    Clues,
    Cuts,
    Diagnosis,
    Fusion,
    capped_certainty,
    diagnose,
    grounded,
    group_of,
    uncontested,
)
from bot.diagnosis.nearest import IncidentIndex, Neighbour, VoteParams, category_votes
from bot.knowledge.cards import Card
from bot.knowledge.incidents import Incident
from bot.logs.analyze import analyzer_for
from bot.logs.model import LogReport
from bot.logs.sources import text_source

MODES = ("grep", "rules", "nearest", "fused")

#: A 15-rule keyword grep: the baseline any ranking must beat (first match wins, in order).
GREP_RULES: tuple[tuple[str, str], ...] = (
    (r"out of memory|OutOfMemoryError", "rank_crashed"),
    (r"\bXid\b|uncorrectable ECC|fallen off the bus", "gpu_hardware_fault"),
    (r"IBV_WC|ibv_|NET/IB.*(?:error|completion)", "infiniband_roce"),
    (r"/dev/shm|shared memory|Bus error|--ipc", "shm_ipc_container"),
    (r"Duplicate GPU|invalid device ordinal", "device_assignment"),
    (r"Address already in use|clients joined|Connection refused|[Rr]endezvous|MASTER_ADDR",
     "rendezvous_failure"),
    (r"SOCKET_IFNAME|docker0|[Nn]o socket interface", "network_interface"),
    (r"peermem|GPUDirect|GDR|dma-?buf|memlock", "gpudirect_rdma"),
    (r"[Ff]abric [Mm]anager|NVLS|not yet initialized", "nvswitch_fabric"),
    (r"\bP2P\b|\bACS\b|IOMMU", "p2p_pcie_topology"),
    (r"[Mm]ismatch|[Dd]esync|different shapes|disagreement", "collective_mismatch"),
    (r"undefined symbol|version is insufficient|built for|version mismatch",
     "version_incompatibility"),
    (r"vllm|sglang|update_weight|rollout", "rl_weight_sync"),
    (r"SIGKILL|exitcode: -9|Traceback|Error:", "rank_crashed"),
    (r"Watchdog caught|timed out|[Tt]imeout", "timeout_too_short"),
)
_GREP = [(re.compile(p), c) for p, c in GREP_RULES]


def analyze_incidents(incidents: Iterable[Incident], cards: Sequence[Card]
                      ) -> dict[str, LogReport]:
    """Each incident's log read by the analyzer, by incident id (no corpus involved)."""
    analyzer = analyzer_for(cards)
    return {i.id: analyzer.analyze([text_source(f"{i.id}.log", i.log)]) for i in incidents}


def grep_ranking(log: str) -> tuple[str, ...]:
    """The baseline: the categories of the grep rules that match, in rule order."""
    return tuple(dict.fromkeys(c for rx, c in _GREP if rx.search(log)))
K_MAX = 12


@dataclass(frozen=True)
class CaseResult:
    id: str
    category: str
    ranked: tuple[str, ...]
    top1: bool
    top3: bool


@dataclass
class Score:
    results: list[CaseResult] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.results)

    @property
    def top1(self) -> float:
        return sum(r.top1 for r in self.results) / self.n if self.n else 0.0

    @property
    def top3(self) -> float:
        return sum(r.top3 for r in self.results) / self.n if self.n else 0.0

    def by_category(self) -> dict[str, tuple[int, int, int]]:
        """category -> (cases, top-1 hits, top-3 hits)."""
        out: dict[str, tuple[int, int, int]] = {}
        for r in self.results:
            n, a, b = out.get(r.category, (0, 0, 0))
            out[r.category] = (n + 1, a + r.top1, b + r.top3)
        return dict(sorted(out.items()))


def thread_of(incident: Incident) -> str:
    """The group an incident belongs to for cross-validation: its source thread."""
    return incident.url.split("#", 1)[0].rstrip("/").lower()


def fold_of(incident: Incident, folds: int) -> int:
    digest = hashlib.sha1(thread_of(incident).encode()).digest()
    return int.from_bytes(digest[:4], "big") % folds


def ranked_categories(report: LogReport, cards: Sequence[Card], neighbours: Sequence[Neighbour],
                      fusion: Fusion, mode: str = "fused") -> tuple[str, ...]:
    if mode == "nearest":
        votes = category_votes(neighbours, fusion.votes)
        return tuple(sorted(votes, key=lambda c: -votes[c]))
    used = neighbours if mode == "fused" else []
    diagnosis = diagnose(report, cards, fusion=fusion, neighbours=used)
    return tuple(dict.fromkeys(rc.category for rc in diagnosis.root_causes))


def judge(incident: Incident, ranked: tuple[str, ...]) -> CaseResult:
    ok = incident.accepted
    return CaseResult(incident.id, incident.category, ranked,
                      bool(ranked) and ranked[0] in ok, bool(ok & set(ranked[:3])))


def neighbours_for(index: IncidentIndex, report: LogReport, case: Incident,
                   exclude: Callable[[Incident], bool] | None = None) -> list[Neighbour]:
    """The case's nearest incidents, never its own thread (nor what `exclude` rules out)."""
    own = thread_of(case)

    def skip(other: Incident) -> bool:
        return thread_of(other) == own or (exclude is not None and exclude(other))

    return index.nearest(report.salient.lines(), k=K_MAX, exclude=skip)


def evaluate(cases: Sequence[Incident], reports: Mapping[str, LogReport], cards: Sequence[Card],
             index_of: Callable[[Incident], IncidentIndex], fusion: Fusion, mode: str = "fused",
             exclude_of: Callable[[Incident], Callable[[Incident], bool]] | None = None
             ) -> Score:
    """Rank every case with the index `index_of(case)` (built without the case's fold)."""
    score = Score()
    for case in cases:
        index = index_of(case)
        exclude = exclude_of(case) if exclude_of else None
        if mode == "grep":
            score.results.append(judge(case, grep_ranking(case.log)))
            continue
        nb = neighbours_for(index, reports[case.id], case, exclude) if mode != "rules" else []
        score.results.append(judge(case, ranked_categories(reports[case.id], cards, nb, fusion,
                                                           mode)))
    return score


def _constant(index: IncidentIndex) -> Callable[[Incident], IncidentIndex]:
    return lambda _case: index


def fold_indexes(corpus: Sequence[Incident], folds: int, cards: Sequence[Card] = ()
                 ) -> dict[int, IncidentIndex]:
    """One index per fold, built from the incidents of all other folds (and the cards)."""
    return {f: IncidentIndex([i for i in corpus if fold_of(i, folds) != f], cards)
            for f in range(folds)}


def cross_validate(corpus: Sequence[Incident], reports: Mapping[str, LogReport],
                   cards: Sequence[Card], fusion: Fusion, mode: str = "fused", folds: int = 5,
                   indexes: dict[int, IncidentIndex] | None = None) -> Score:
    """Fixed settings, grouped k-fold: each case ranked with an index of the other folds."""
    indexes = indexes or fold_indexes(corpus, folds, cards)
    return evaluate(corpus, reports, cards, lambda c: indexes[fold_of(c, folds)], fusion, mode)


def leave_one_repo_out(corpus: Sequence[Incident], reports: Mapping[str, LogReport],
                       cards: Sequence[Card], fusion: Fusion) -> Score:
    """Each case ranked without any incident from its own repository."""
    index = _constant(IncidentIndex(corpus, cards))
    return evaluate(corpus, reports, cards, index, fusion, "fused",
                    exclude_of=lambda c: (lambda other: other.repo.lower() == c.repo.lower()))


def grid(weights: Iterable[float] = (0.3, 0.45, 0.6, 0.75, 0.9), ks: Iterable[int] = (3, 5, 8),
         powers: Iterable[float] = (1.0, 2.0), floors: Iterable[float] = (0.05, 0.1),
         full_ats: Iterable[float] = (0.3, 0.5)) -> list[Fusion]:
    return [Fusion(w, VoteParams(k=k, floor=fl, power=p, full_at=fa))
            for w, k, p, fl, fa in product(weights, ks, powers, floors, full_ats)]


def _key(score: Score) -> tuple[float, float]:
    return (score.top1, score.top3)


def tune(train: Sequence[Incident], reports: Mapping[str, LogReport], cards: Sequence[Card],
         candidates: Sequence[Fusion]) -> tuple[Fusion, Score]:
    """The settings with the best top-1 (then top-3) over `train`, each case ranked with an
    index of `train` less its own thread."""
    index = IncidentIndex(train, cards)
    cached = {c.id: neighbours_for(index, reports[c.id], c) for c in train}
    best: tuple[Fusion, Score] | None = None
    for fusion in candidates:
        score = Score([judge(c, ranked_categories(reports[c.id], cards, cached[c.id], fusion))
                       for c in train])
        if best is None or _key(score) > _key(best[1]):
            best = (fusion, score)
    assert best is not None
    return best


def nested_cv(corpus: Sequence[Incident], reports: Mapping[str, LogReport],
              cards: Sequence[Card], candidates: Sequence[Fusion], folds: int = 5
              ) -> tuple[Score, list[Fusion]]:
    """Settings tuned inside each training split, scored on the held-out fold."""
    total = Score()
    chosen: list[Fusion] = []
    for f in range(folds):
        train = [i for i in corpus if fold_of(i, folds) != f]
        test = [i for i in corpus if fold_of(i, folds) == f]
        fusion, _ = tune(train, reports, cards, candidates)
        chosen.append(fusion)
        total.results.extend(evaluate(test, reports, cards, _constant(IncidentIndex(train, cards)),
                                      fusion).results)
    return total, chosen


# -- certainty: how often each word is right, and the cuts that keep it honest ----------------

WORDS = ("likely", "possible", "weak")


@dataclass(frozen=True)
class Outcome:
    """One answer's leading cause, judged: its confidence, the kinds of evidence behind it
    (`engine.KINDS`), and whether its category is one the incident accepts."""

    id: str
    thread: str
    mode: str
    confidence: float
    kinds: frozenset[str]
    top1: bool
    top3: bool
    #: the leading cause's lead over the next category (confidence points); None: not known
    margin: float | None = None
    #: whether the leading cause's card has its own evidence (`engine.confirmed`); None:
    #: not known
    matched: bool | None = None
    #: with a question beside a log: what the log alone said of the leading category
    log_alone: Alone | None = None
    #: the answer's verdict (every incident is a real failure: `no_evidence` is a miss)
    verdict: str = ""
    #: the leading cause's category
    category: str = ""
    #: the strongest clue the log gives for the leading category and for any other
    #: (`engine.named`); None: not known
    clues: Clues | None = None

    def word(self, cuts: Cuts | None = None) -> str:
        """The certainty word the answer gives its leading cause; an answer whose verdict
        is `no_evidence` heads with "the log shows no failure" and claims none (weak)."""
        if self.verdict == "no_evidence":
            return "weak"
        return capped_certainty(self.confidence, self.kinds, self.log_alone, cuts, self.margin,
                                self.clues, self.matched)

    @property
    def group(self) -> str:
        return group_of(self.kinds, uncontested(self.confidence, self.margin))


@dataclass(frozen=True)
class WordStats:
    word: str
    n: int
    right: int
    total: int

    @property
    def precision(self) -> float | None:
        return self.right / self.n if self.n else None

    @property
    def coverage(self) -> float:
        return self.n / self.total if self.total else 0.0


def word_stats(outcomes: Sequence[Outcome], cuts: Cuts) -> dict[str, WordStats]:
    """Per certainty word: how many leading causes were said with it, and how many were right."""
    out = {}
    for word in WORDS:
        said = [o for o in outcomes if o.word(cuts) == word]
        out[word] = WordStats(word, len(said), sum(o.top1 for o in said), len(outcomes))
    return out


#: What each word must be worth on the training folds, with room for the held-out fold.
TARGETS = {"likely": 0.9, "possible": 0.6}
#: a group's cut is only lowered where at least this many training cases stand above it
MIN_SUPPORT = 4
NEVER = 1.01


def _lowest_cut(points: Sequence[tuple[float, bool]], target: float, margin: float) -> float:
    """The lowest confidence c such that the answers at or above c are right at least
    `target + margin` of the time (and at least `MIN_SUPPORT` of them); NEVER when none."""
    best = NEVER
    for c in sorted({p for p, _ in points}, reverse=True):
        above = [ok for p, ok in points if p >= c]
        if len(above) >= MIN_SUPPORT and sum(above) / len(above) >= target + margin:
            best = c
    return best


def fit_cuts(outcomes: Sequence[Outcome], margin: float = 0.03) -> Cuts:
    """Per evidence group, the lowest cuts at which `likely` and `possible` meet their
    targets on `outcomes` (a group with too few cases keeps the uncalibrated cuts; one with
    too few below its likely cut says no `possible`, and the possible cut is never above the
    likely one; `possible` is chosen on the causes at least
    `engine.CLOSE` ahead of the next category, as only those can be said with it)."""
    cuts: Cuts = {}
    for group in GROUPS:
        # an answer that finds no failure in the log says no word for its candidates
        rows = [o for o in outcomes if o.group == group and o.verdict != "no_evidence"]
        points = [(o.confidence, o.top1) for o in rows]
        if len(points) < 2 * MIN_SUPPORT:
            cuts[group] = UNCALIBRATED[group]
            continue
        likely = _lowest_cut(points, TARGETS["likely"], margin)
        below = [(o.confidence, o.top1) for o in rows
                 if o.confidence < likely and (o.margin is None or o.margin >= CLOSE)
                 and grounded(o.kinds, o.log_alone is not None, o.clues, o.matched)]
        # too few cases below the likely cut to check `possible` on: it is not said (a cause
        # of the group below its likely cut is unclear)
        possible = min(likely, _lowest_cut(below, TARGETS["possible"], margin)
                       if len(below) >= 2 * MIN_SUPPORT else likely)
        cuts[group] = (round(likely, 3), round(possible, 3))
    return cuts


def grouped_cut_cv(outcomes: Sequence[Outcome], folds: int = 5, margin: float = 0.03
                   ) -> tuple[list[tuple[Outcome, str]], list[Cuts]]:
    """Cuts chosen on the training threads of each fold, applied to the held-out threads:
    every outcome with the word it would have been said with. Folds are drawn by thread."""
    def fold(o: Outcome) -> int:
        return int.from_bytes(hashlib.sha1(o.thread.encode()).digest()[:4], "big") % folds

    said: list[tuple[Outcome, str]] = []
    chosen = []
    for f in range(folds):
        cuts = fit_cuts([o for o in outcomes if fold(o) != f], margin)
        chosen.append(cuts)
        said += [(o, o.word(cuts)) for o in outcomes if fold(o) == f]
    return said, chosen


def said_stats(said: Sequence[tuple[Outcome, str]]) -> dict[str, WordStats]:
    return {w: WordStats(w, sum(1 for _, x in said if x == w),
                         sum(o.top1 for o, x in said if x == w), len(said)) for w in WORDS}


def outcome_of(case: Incident, mode: str, diagnosis: Diagnosis, verdict: str | None = None
               ) -> Outcome:
    """The leading cause of `diagnosis` for `case`, judged (`verdict`: the answer's, when
    it is not the diagnosis's own)."""
    ranked = tuple(dict.fromkeys(rc.category for rc in diagnosis.root_causes))
    judged = judge(case, ranked)
    top = diagnosis.root_causes[0] if diagnosis.root_causes else None
    second = next((rc.confidence for rc in diagnosis.root_causes
                   if top is not None and rc.category != top.category), 0.0)
    return Outcome(case.id, thread_of(case), mode, top.confidence if top else 0.0,
                   top.kinds if top else frozenset(), judged.top1, judged.top3,
                   round((top.confidence if top else 0.0) - second, 3),
                   bool(top and top.card_matched), top.log_alone if top else None,
                   verdict or diagnosis.verdict, top.category if top else "",
                   top.clues if top else None)


def decisive_logs_held(outcomes: Sequence[Outcome]) -> tuple[int, int, int, int, int]:
    """A question must not outvote a decisive log, nor make an evidence-free one a diagnosis:
    (logs whose `analyze` answer is diagnosed, of those the `ask --log` answers that lead with
    another category, and that are not diagnosed; logs whose `analyze` answer is
    no_evidence, of those the `ask --log` answers that are diagnosed)."""
    alone = {o.id: o for o in outcomes if o.mode == "analyze"}
    asked = {o.id: o for o in outcomes if o.mode == "ask --log"}
    both = [(alone[i], asked[i]) for i in alone if i in asked]
    decisive = [(a, q) for a, q in both if a.verdict == "diagnosed"]
    empty = [(a, q) for a, q in both if a.verdict == "no_evidence"]
    return (len(decisive), sum(q.category != a.category for a, q in decisive),
            sum(q.verdict != "diagnosed" for _, q in decisive), len(empty),
            sum(q.verdict == "diagnosed" for _, q in empty))


# -- harder splits: new repositories, newer threads --------------------------------------------

#: (name, training incidents, test incidents): one split of a cross-validation scheme
Split = tuple[str, list[Incident], list[Incident]]
SCHEMES = ("grouped", "repo", "time")


def grouped_splits(corpus: Sequence[Incident], folds: int = 5) -> list[Split]:
    """Grouped k-fold by thread (`fold_of`)."""
    return [(f"fold {f}", [i for i in corpus if fold_of(i, folds) != f],
             [i for i in corpus if fold_of(i, folds) == f]) for f in range(folds)]


def repo_splits(corpus: Sequence[Incident]) -> list[Split]:
    """Leave one repository out: each repository's incidents answered with indexes (and cuts)
    of the other repositories only, as a thread from a project never seen would be."""
    repos = sorted({i.repo.lower() for i in corpus})
    return [(repo, [i for i in corpus if i.repo.lower() != repo],
             [i for i in corpus if i.repo.lower() == repo]) for repo in repos]


def time_splits(corpus: Sequence[Incident], blocks: int = 5) -> list[Split]:
    """Time-ordered: the dated threads in `blocks` blocks by thread date (a thread's incidents
    together, dated by its earliest); each block after the first answered with only the
    older blocks (and the undated incidents, which are never tested) to learn from, as the
    newest threads are answered by a system built before them."""
    first: dict[str, dt.date] = {}
    for i in corpus:
        if i.date is not None:
            t = thread_of(i)
            first[t] = min(first.get(t, i.date), i.date)
    threads = sorted(first, key=lambda t: (first[t], t))
    size = -(-len(threads) // blocks)
    block = {t: n // size for n, t in enumerate(threads)}
    out: list[Split] = []
    for b in range(1, blocks):
        test = [i for i in corpus if block.get(thread_of(i), -1) == b]
        train = [i for i in corpus if block.get(thread_of(i), -1) < b]
        if test:
            out.append((f"block {b}", train, test))
    return out


def splits_of(scheme: str, corpus: Sequence[Incident], folds: int = 5) -> list[Split]:
    """The splits of a scheme in `SCHEMES` (`folds`: grouped folds or time blocks)."""
    if scheme == "grouped":
        return grouped_splits(corpus, folds)
    if scheme == "repo":
        return repo_splits(corpus)
    if scheme == "time":
        return time_splits(corpus, folds)
    raise ValueError(f"unknown scheme {scheme!r}: one of {', '.join(SCHEMES)}")


def split_cut_cv(splits: Sequence[Split], answered: Sequence[Outcome],
                 pool: Sequence[Outcome], margin: float = 0.03,
                 fit: Callable[[Sequence[Outcome], float], Cuts] | None = None
                 ) -> list[tuple[Outcome, str]]:
    """Cuts chosen on each split's training incidents, applied to its test incidents:
    `answered` are the test answers of every split (answered with that split's indexes),
    `pool` the answers the cuts are fit on (each training incident's, as answered in the
    grouped CV, which is how the shipped cuts are chosen). No test incident's own outcome
    is ever used to choose the cuts it is judged with."""
    fit = fit or fit_cuts
    by_id: dict[str, list[Outcome]] = defaultdict(list)
    for o in answered:
        by_id[o.id].append(o)
    said: list[tuple[Outcome, str]] = []
    for _name, train, test in splits:
        ids = {i.id for i in train}
        cuts = fit([o for o in pool if o.id in ids], margin)
        for case in test:
            said += [(o, o.word(cuts)) for o in by_id.get(case.id, [])]
    return said
