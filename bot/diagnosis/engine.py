"""Ranking root causes: card signatures + structural rules -> a `Diagnosis` (pure).

Scoring, in short:
- a card's signature score is the noisy-OR of the weights of its distinct signatures
  that fired: 1 - prod(1 - w);
- a category's score is the noisy-OR of its best card's signature score (and 0.6 x
  that of cards listing it under `also`) and the strengths of the rule signals for it;
- causal order: when a rank crashed first, the timeout categories (which describe
  the other ranks' symptom, not the cause) are halved unless a card says otherwise;
- nearest incidents: the k real incidents whose salient lines are closest to the log's
  vote for their categories (`bot.diagnosis.nearest`); each category's share of the vote,
  times `Fusion.weight`, is one more part of its noisy-OR;
- confidence = score x (0.6 + 0.4 x score / sum of scores), so a lone strong cause
  reads higher than one of several, and is put in words: likely, possible, weak.
Below 0.3 the verdict is "unknown", but the candidates are still listed, weakest last.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.answering.contract import DIAGNOSED_FROM, Verdict, decide_verdict
from bot.diagnosis.facts import fact_evidence
from bot.diagnosis.nearest import (
    LOCAL_WEIGHT,
    Neighbour,
    NeighbourIndex,
    VoteParams,
    category_votes,
    local_votes,
    split_local,
)
from bot.diagnosis.rules import TIMEOUT_CATEGORIES, Signal, signals
from bot.knowledge.cards import Card
from bot.logs.crossrank import CrossRank, Suspect, analyze_ranks
from bot.logs.model import Evidence, LogReport
from bot.logs.salient import ERRORISH

if TYPE_CHECKING:
    from bot.memory.model import LocalIncident

UNKNOWN_BELOW = DIAGNOSED_FROM
SHOW_AT_LEAST = 0.05
#: With evidence, at least this many candidates are listed (weak ones filled in from the
#: categories below the display line and from more distant past incidents, `FILL_K` nearest,
#: each scored `FILL_SCALE` x its similarity), so the right cause is more often in the top 3.
MIN_CANDIDATES, FILL_K, FILL_SCALE = 3, 12, 0.1
LIKELY_FROM = 0.5


#: A signal this strong is a direct detection (a framework compared the ranks' collectives,
#: Flight Recorder dumps differ), not a guess from a timeout.
DETECTED = 0.8


#: What backs a category: `signature` (one of its cards' signatures fired), `detected` (a
#: structural rule that compares ranks or reads a decisive line, strength >= DETECTED),
#: `rule` (a weaker structural rule), `nearest` (past incidents near the log voted for it),
#: `question` (only the question's wording points at it), `specific` (the question points
#: at one of its cards), `asked` (both readings of the question put it first: the card it
#: reads most like, and what most of the past threads whose questions read like it turned
#: out to be; `bot.answering.ask.agree`), `fact` (an answered deciding question supports it).
KINDS = ("signature", "detected", "rule", "nearest", "question", "specific", "asked", "fact")
#: The groups certainty is calibrated in, strongest first: a direct detection; a card's
#: signature that the nearest past incidents agree with; other evidence in the log with no
#: rival (`uncontested`); other evidence in the log; only a question that points at one card;
#: only the question (or an answered deciding question).
GROUPS = ("detected", "agreed", "uncontested", "log", "specific", "question")
Cuts = dict[str, tuple[float, float]]
#: (likely from, possible from) per group; before calibration every group read 0.5 / 0.3.
UNCALIBRATED: Cuts = {g: (LIKELY_FROM, UNKNOWN_BELOW) for g in GROUPS}
#: A leading cause is uncontested when its lead over the next category is at least this share
#: of its confidence (no rival within a fifth of it).
UNCONTESTED = 0.8
#: A leading cause this close to the next category (confidence points) is never `possible`:
#: the answer is unclear between the two ("weak", listing both families).
CLOSE = 0.15
#: Chosen on every dev incident (analyze, ask --log, ask; `benchmarks/calibration.py --fit`)
#: as the lowest confidence at which `likely` was right >= 93% and `possible` (of the causes
#: at least `CLOSE` ahead that the log itself names, `grounded`) >= 63% of the time; answers
#: that find no failure in the log say no word and are left out; a group with too few causes
#: below its likely cut to check `possible` on (detected, agreed) says none. Applied to
#: threads never tuned on (dev, cuts fit on each split's training threads; README table):
#: likely 89-97% right on 32-34% of analyze answers and possible 77-88% in grouped 5-fold,
#: leave-one-repo-out and time-ordered CV; ask --log likely 89-97%, possible 73-79% (138
#: incidents, with `named`; the shipped cuts themselves: possible 72-80% and 75-79%).
#: `UNCONTESTED` and `CLOSE` were chosen on the same grouped CV (0.7/0.8/0.9; 0.05-0.2).
#: Kept as they are after `confirmed` and `ask.agree` (issue 25), which only take leads out
#: of `possible`; a refit on the 175 dev incidents now would lower the question group's
#: possible cut to 0.41 and say no `possible` in the uncontested group (`--fit`).
CERTAINTY_CUTS: Cuts = {"detected": (0.68, 0.68), "agreed": (0.54, 0.54),
                        "uncontested": (0.51, 0.21), "log": (1.01, 0.26),
                        "specific": (0.7, 0.57), "question": (1.01, 0.69)}


#: The log's own evidence for a category: one of its cards' signatures fired, or a structural
#: rule read the log (or the person answered a deciding question). Past incidents that the log
#: resembles and a question's words rank, but are not the log naming the cause.
OWN = frozenset({"signature", "detected", "rule", "fact"})


#: A rule gives each clue a strength: about how often that line means that cause. Below this
#: a clue is a hint that mostly means something else (ncclInternalError on one node, 0.2;
#: ncclRemoteError as a network fault, 0.2): a lead the log gives only such hints for is
#: unclear, however the neighbours and the question add up (`named`).
HINT = 0.3

#: (the strongest clue the log itself gives for a cause, the strongest it gives for any other
#: category): a signature's or a rule's strength, or an answered question's
Clues = tuple[float, float]


def named(clues: Clues | None) -> bool:
    """Whether the log itself names a cause: its own strongest clue is at least a `HINT` and
    no other category has a stronger one of its own (None: not known, no such rule). A lead
    that the noisy-OR puts first on weak hints and neighbours while another family has the
    log's strongest clue is a close call between them, not a candidate to bet on. Of the
    leads the shipped cuts said `possible` on dev (138 incidents), those without it were
    right 0 of 3 `analyze` answers in grouped, leave-one-repo-out and time-ordered CV alike,
    and 1 of 5, 1 of 3, 1 of 3 `ask --log` answers; with it, `possible` is right 80%, 80%,
    72% (`analyze`) and 79%, 79%, 75% (`ask --log`) (benchmarks/calibration.py)."""
    return clues is None or (clues[0] >= HINT - 1e-9 and clues[0] >= clues[1])


def grounded(kinds: frozenset[str] | set[str], log_given: bool = False,
             clues: Clues | None = None, matched: bool | None = None) -> bool:
    """Whether a cause may be `possible`: with a log (`log_given`, or its kinds show one: the
    nearest past incidents voted), only when the log itself names it (`OWN`, and `named` by its
    `clues` when known) and it is more than one generic line's hint (`confirmed`; `matched`:
    whether its card's own evidence matched, None: not known). Beside a log, a non-likely lead
    that rests only on what the log resembles and the question's words was right 10 of 22 times
    in grouped CV, 7/20 leaving its repository out and 3/13 on newer threads (dev `ask --log`,
    benchmarks/calibration.py). Without a log, only when two independent readings of the
    question put it first (`asked`, `bot.answering.ask.agree`): the card it reads most like and
    the past threads whose questions resemble it. Question-only leads said `possible` were right
    17/21, 13/18 and 16/18 times with the past threads' vote behind them and 8/15, 7/15 and 5/11
    without (grouped, leave-one-repo-out, time-ordered CV, dev `ask`); `agree` adds the cards'
    reading."""
    if kinds & OWN:
        return named(clues) and confirmed(kinds, matched)
    if log_given or "nearest" in kinds:
        return False
    return "asked" in kinds


def confirmed(kinds: frozenset[str] | set[str], matched: bool | None) -> bool:
    """Whether a cause the log names has a second reading beside the line that named its
    family: its card's own evidence matched (`matched`: one of the card's signatures fired,
    or a past incident filed under that card is among the nearest to the log), or the person
    answered a deciding question for it (`fact`). A rule names a family from one line
    ("connection refused", ncclSystemError, a topology table); with no known failure of that
    family that the log resembles, it is a family to check, not a cause to bet on: the answer
    is unclear and names the families. On the dev threads no card cites, the leads the
    shipped cuts called `possible` before this rule were right 33 of 35 times with a matched
    card and 55 of 85 without (`analyze` and `ask --log`, grouped, leave-one-repo-out and
    time-ordered CV together; with cuts fit in each split's training threads, 27 of 28 and
    36 of 62; benchmarks/calibration.py). How strong the rule's clue was did not tell the
    unmatched ones apart (clues of 0.5 or more right 22 of 36 times, weaker ones 33 of 49).
    None (not known): not required."""
    return matched is None or matched or "fact" in kinds


def uncontested(confidence: float, margin: float | None) -> bool:
    """Whether a leading cause has no rival (`UNCONTESTED`); `margin`: its lead over the
    next category, None when not known (then it is not)."""
    return margin is not None and confidence > 0 and margin >= UNCONTESTED * confidence


def group_of(kinds: frozenset[str] | set[str], alone: bool = False) -> str:
    """The calibration group of a cause by the kinds of evidence behind it (`alone`: it is
    an uncontested leading cause, see `uncontested`)."""
    if "detected" in kinds:
        return "detected"
    if {"signature", "nearest"} <= kinds:
        return "agreed"
    if kinds & {"signature", "rule", "nearest"}:
        return "uncontested" if alone else "log"
    return "specific" if "specific" in kinds else "question"


def certainty(confidence: float, kinds: frozenset[str] | set[str] = frozenset(),
              cuts: Cuts | None = None, margin: float | None = None,
              log_given: bool = False, clues: Clues | None = None,
              matched: bool | None = None) -> str:
    """The confidence of a root cause in words: likely, possible or weak, from the cuts of
    its evidence group (`CERTAINTY_CUTS`, chosen by grouped cross-validation). `margin`: a
    cause's lead over the best other category; within `CLOSE` (or behind) it is never
    `possible` (None: not known, no such rule); nor is a cause the log does not name itself
    (`grounded`; `log_given`: a log was read; `clues`: see `named`; `matched`: see
    `confirmed`)."""
    likely_from, possible_from = (cuts or CERTAINTY_CUTS)[
        group_of(kinds, uncontested(confidence, margin))]
    if confidence >= likely_from and (margin is None or margin > 0):
        return "likely"  # only a leading cause: one behind another is never more than weak
    if confidence >= possible_from and (margin is None or margin >= CLOSE) \
            and grounded(kinds, log_given, clues, matched):
        return "possible"
    return "weak"


@dataclass(frozen=True)
class Fusion:
    """How the nearest-incident channel joins the cards and rules: the settings with the best
    top-1 (then top-3) over the dev corpus, each case ranked without its own thread
    (`benchmarks/eval_cases.py --tune`). The splits of nested CV mostly chose power 1 and
    full_at 0.3 and a weight of 0.3-0.6 (a small corpus: the choice is not sharp)."""

    weight: float = 0.3
    votes: VoteParams = field(default_factory=VoteParams)
    #: the team's own incidents' weight (`bot.diagnosis.nearest.LOCAL_WEIGHT`)
    local_weight: float = LOCAL_WEIGHT
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass
class RootCause:
    category: str
    card: str | None
    confidence: float
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    #: the team's own resolved incident this cause rests on, when it is the strongest part
    #: of the evidence (its card, if it named one, is the cause's card)
    local: LocalIncident | None = None
    #: the kinds of evidence behind the category (`KINDS`)
    kinds: frozenset[str] = frozenset()
    #: whether the card's own evidence matched: one of its signatures fired, or it (or an
    #: incident filed under it) is among the nearest neighbours that voted
    card_matched: bool = False

    #: with a question beside a log: the log-alone (confidence, kinds, margin) of this
    #: category, or (0, ∅, None) when the log alone does not name it (`cap_by_log`)
    log_alone: Alone | None = None
    #: the lead over the best cause of another category (confidence points): a leading
    #: cause's lead, negative below it (so only a leading cause is ever `possible`)
    margin: float | None = None
    #: the log shows no failure (only the silence after NCCL's set-up): at most "unclear"
    unfailed: bool = False
    #: the strongest clue the log gives for this category and for any other (`named`);
    #: None when not known
    clues: Clues | None = None

    @property
    def certainty(self) -> str:
        if self.unfailed:
            return "weak"
        # the team's own resolved incident nearest to the log is a second reading, card or not
        return capped_certainty(self.confidence, self.kinds, self.log_alone, margin=self.margin,
                                clues=self.clues,
                                matched=self.card_matched or self.local is not None)


#: what the log alone said of a category: (confidence, kinds, margin)
Alone = tuple[float, frozenset[str], float | None]


def capped_certainty(confidence: float, kinds: frozenset[str], log_alone: Alone | None,
                     cuts: Cuts | None = None, margin: float | None = None,
                     clues: Clues | None = None, matched: bool | None = None) -> str:
    """A cause's certainty; with a question beside a log, `likely` only when the log alone
    says `likely` for it: the question ranks, but cannot make a cause certain. A lead the
    question lifted past the likely cut is then `possible` only on the terms every
    `possible` meets (a clear lead, `CLOSE`, that the log itself names, `grounded`), never
    by the question's lift alone: said `possible` that way, such leads were right 1 of 6
    times on the dev threads no card cites (grouped and leave-one-repo-out CV, `ask --log`,
    benchmarks/calibration.py)."""
    word = certainty(confidence, kinds, cuts, margin, log_given=log_alone is not None,
                     clues=clues, matched=matched)
    if word == "likely" and log_alone is not None and \
            certainty(log_alone[0], log_alone[1], cuts, log_alone[2]) != "likely":
        clear = margin is None or margin >= CLOSE
        return "possible" if clear and grounded(kinds, True, clues, matched) else "weak"
    return word


def cap_by_log(diagnosis: Diagnosis, log_diagnosis: Diagnosis) -> None:
    """Mark each cause of a question-and-log `diagnosis` with what the log alone said of it
    (see `capped_certainty`)."""
    alone: dict[str, Alone] = {}
    for rc in log_diagnosis.root_causes:
        alone.setdefault(rc.category, (rc.confidence, rc.kinds, rc.margin))
    for rc in diagnosis.root_causes:
        rc.log_alone = alone.get(rc.category, (0.0, frozenset(), None))


@dataclass
class Diagnosis:
    root_causes: list[RootCause]
    suspects: list[Suspect]
    crossrank: CrossRank
    verdict: Verdict
    card_scores: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the closest past incidents, best first (empty without a corpus)
    neighbours: list[Neighbour] = field(default_factory=list)
    #: the log's only evidence is the hang rule's inference from silence: not evidence of a
    #: failure unless a person says the job hangs (`reports_hang`, see `bot.answering.ask`)
    silence_only: bool = False


#: How people say a job hangs (en, zh). Beside a log whose only evidence is NCCL's set-up and
#: then silence, such a report makes the silence evidence of a hang (issue 25).
_HANG_WORDS = re.compile(
    r"\b(?:hang(?:s|ing)?|hung|stuck|stall(?:s|ed|ing)?|freez(?:e|es|ing)|froze(?:n)?|"
    r"deadlock(?:s|ed)?|no progress|makes? no progress|never (?:finish|return|complete)s?)\b|"
    r"卡住|卡死|卡在|挂起|无响应|没有响应|不动了|死锁|hang住", re.IGNORECASE)


def reports_hang(text: str) -> bool:
    """Whether a person's words say the job hangs (is stuck, stalls, freezes)."""
    return bool(_HANG_WORDS.search(text))


def noisy_or(values: Sequence[float]) -> float:
    p = 1.0
    for v in values:
        p *= 1.0 - max(0.0, min(1.0, v))
    return 1.0 - p


def card_signature_scores(report: LogReport) -> dict[str, float]:
    per_card: dict[str, list[float]] = defaultdict(list)
    for hit in report.signatures.values():
        per_card[hit.card].append(hit.weight)
    return {card: noisy_or(ws) for card, ws in per_card.items()}


def _tokens(text: str) -> set[str]:
    return {t.lower() for t in _TOKEN.findall(text)}


def pick_card(
    category: str,
    cards: Sequence[Card],
    card_scores: dict[str, float],
    evidence: Sequence[Evidence],
    first: set[str] | frozenset[str] = frozenset(),
) -> Card | None:
    """The card of a category that best explains the evidence; among cards whose signatures
    fired, one that fired on the first failure (`first`: the cards whose signatures fired on
    the lines of the rank that failed first) wins over those that fired on what followed."""
    members = [c for c in cards if c.category == category] or [
        c for c in cards if category in c.also
    ]
    if not members:
        return None
    scored = [c for c in members if card_scores.get(c.id)]
    if scored:
        on_first = [c for c in scored if c.id in first]
        return max(on_first or scored, key=lambda c: card_scores[c.id])
    words = _tokens(" ".join(e.text for e in evidence))
    if not words:
        return members[0]
    return max(members, key=lambda c: (len(words & _tokens(c.text("en"))), -len(c.id)))


def cards_on_lines(report: LogReport, lines: Sequence[Evidence]) -> set[str]:
    """The cards whose signatures fired on any of `lines`."""
    where = {(e.file, e.line) for e in lines}
    return {hit.card for hit in report.signatures.values()
            if any((e.file, e.line) in where for e in hit.evidence)}


def diagnose(report: LogReport, cards: Sequence[Card], extra: Sequence[Signal] = (),
             incidents: NeighbourIndex | None = None, fusion: Fusion | None = None,
             neighbours: Sequence[Neighbour] | None = None,
             facts: Mapping[str, str] | None = None, extra_observed: bool = False
             ) -> Diagnosis:
    """Rank root causes. `incidents` adds the nearest-incident channel; `neighbours`, when
    given, are used instead of querying it (the benchmark reuses one query across settings);
    `facts` are answers to deciding questions (`bot.diagnosis.facts`): evidence like any
    other, never evidence of a failure on their own. `extra` signals are a question's
    unless `extra_observed` (a live hang sample's: calibrated as the log's rules are)."""
    fusion = fusion or Fusion()
    cr = analyze_ranks(report)
    # the ranks Flight Recorder dumps single out come first
    # (their hosts from the text logs of the same job, when given, or where the cross-rank
    # reading placed them: the one node no line placed a rank on)
    placed = {s.rank: s.host for s in cr.suspects if s.rank is not None and s.host}
    fr_suspects = [Suspect(r, report.ranks[r].host if r in report.ranks and report.ranks[r].host
                           else placed.get(r), f.text, 1.0)
                   for f in report.flight_recorder for r in f.ranks]
    if fr_suspects:
        cr.suspects = [*fr_suspects, *(s for s in cr.suspects
                                       if s.rank not in {x.rank for x in fr_suspects})]
    sigs = [*signals(report, cr), *extra]
    card_scores = card_signature_scores(report)
    by_id = {c.id: c for c in cards}

    parts: dict[str, list[float]] = defaultdict(list)
    why: dict[str, list[str]] = defaultdict(list)
    evidence: dict[str, list[Evidence]] = defaultdict(list)
    best_card_score: dict[str, float] = defaultdict(float)
    for cid, score in card_scores.items():
        card = by_id.get(cid)
        if card is None:
            continue
        best_card_score[card.category] = max(best_card_score[card.category], score)
        for other in card.also:
            best_card_score[other] = max(best_card_score[other], 0.6 * score)
    for category, score in best_card_score.items():
        parts[category].append(score)
    kinds: dict[str, set[str]] = defaultdict(set)
    for category, score in best_card_score.items():
        if score > 0:
            kinds[category].add("signature")
    log_sigs = sigs[: len(sigs) - len(extra)] if extra else sigs
    for s in log_sigs:
        kinds[s.category].add("detected" if s.strength >= DETECTED else "rule")
    for s in extra:
        kinds[s.category].add(("detected" if s.strength >= DETECTED else "rule")
                              if extra_observed else "question")
    for s in sigs:
        parts[s.category].append(s.strength)
        if s.reason not in why[s.category]:
            why[s.category].append(s.reason)
        evidence[s.category].extend(s.evidence)
    # the strongest clue the log itself gives for each category (`named`): a signature, or a
    # rule that read a line; not an inference from silence (a candidate, not a clue)
    clue: dict[str, float] = defaultdict(float)
    for category, score in best_card_score.items():
        clue[category] = max(clue[category], score)
    for s in (sigs if extra_observed else log_sigs):
        if not s.from_silence:
            clue[s.category] = max(clue[s.category], s.strength)
    has_evidence = report.shows_failure or bool(sigs)
    if not has_evidence:
        neighbours = []
    elif neighbours is None:
        neighbours = (incidents.nearest(report.salient.lines(), k=max(fusion.votes.k, FILL_K))
                      if incidents is not None else [])
    neighbours = list(neighbours)
    own, public = split_local(neighbours)  # the team's own incidents have their own vote
    local_led: dict[str, tuple[float, Neighbour]] = {}
    for category, strength in local_votes(own, fusion.local_weight).items():
        parts[category].append(strength)
        voter = next(n for n in own if category in n.doc.accepted)
        local_led[category] = (strength, voter)
        kinds[category].add("nearest")  # a nearest incident, the team's own
        why[category].append(f"seen before by this team: {voter.doc.id} (similarity "
                             f"{voter.score:.2f})")
        if incidents is not None:
            evidence[category].extend(_shared_lines(report, voter, incidents))
    if public:
        for category, share in category_votes(public, fusion.votes).items():
            parts[category].append(fusion.weight * share)
            voters = [n for n in public[: fusion.votes.k] if category in n.doc.accepted]
            if voters:
                kinds[category].add("nearest")
                why[category].append(_resembles(voters))
                if incidents is not None:
                    evidence[category].extend(_shared_lines(report, voters[0], incidents))

    before_facts = {c: noisy_or(v) for c, v in parts.items()}
    answered = fact_evidence(facts or {})
    for category, (strength, reason) in answered.supports.items():
        parts[category].append(strength)
        kinds[category].add("fact")
        why[category].insert(0, reason)
        clue[category] = max(clue[category], strength)
    scores = {c: noisy_or(v) for c, v in parts.items()}
    for category, (factor, reason) in answered.rules_out.items():
        if category in scores:
            scores[category] *= factor
            why[category].insert(0, reason)
    crashed = scores.get("rank_crashed", 0.0)
    if crashed >= 0.6:
        # a crash explains the others' timeouts: demote the guesses timeouts suggest, but not
        # a direct detection (a card's decisive signature, a framework's mismatch check)
        detected = {s.category for s in sigs if s.strength >= DETECTED}
        for c in TIMEOUT_CATEGORIES:
            if c in scores and best_card_score.get(c, 0.0) < 0.5 and c not in detected:
                scores[c] *= 0.5

    total = sum(scores.values()) or 1.0
    causes: list[RootCause] = []
    near_cards = {c for n in neighbours[: fusion.votes.k] if n.score >= fusion.votes.floor
                  for c in (n.doc.card, n.incident.card if n.incident else None) if c}
    first_cards = cards_on_lines(report, cr.first_failure.evidence if cr.first_failure else [])

    def order(category: str, score: float) -> tuple[float, float, float, bool, str]:
        """Best first; an exact tie of scores goes to the category the log itself names more
        strongly (its strongest clue), then to the one that led before the answered
        questions, then to a cause before a timeout category (the other ranks' symptom, as
        in the causal order above), then by id: never to the order the evidence came in."""
        return (-round(score, 9), -clue.get(category, 0.0),
                -round(before_facts.get(category, 0.0), 9), category in TIMEOUT_CATEGORIES,
                category)

    ranked = sorted(((c, v) for c, v in scores.items() if v > 0), key=lambda kv: order(*kv))
    # each cause's place in the answer, by its raw score
    keys: dict[int, tuple[float, float, float, bool, str]] = {}
    shown = [(c, v) for c, v in ranked if v >= SHOW_AT_LEAST] or ranked[:3]  # never empty
    if has_evidence and len(shown) < MIN_CANDIDATES:
        shown += _fill(ranked, neighbours, {c for c, _ in shown}, why)
    for category, score in shown:
        lead = local_led.get(category)
        team = lead[1].doc.local if lead and lead[0] >= max(parts[category]) else None
        if team is not None:  # the team's resolution, with its card (or none: something new)
            chosen_card = by_id.get(team.card or "")
            causes.append(_cause(category, chosen_card, score, total, report,
                                 evidence[category], why[category]))
            causes[-1].local = team
            # the team's incident is a past incident nearest to the log: the nearest channel
            causes[-1].kinds = frozenset({*kinds.get(category, ()), "nearest"})
            # the team's incident is this cause's own evidence; its card matched through it
            causes[-1].card_matched = chosen_card is not None
            keys[id(causes[-1])] = order(category, score)
            continue
        card = pick_card(category, cards, card_scores, evidence[category], first_cards)
        entries = [(card, score)]
        if card is not None and card_scores.get(card.id):
            # A second card of the same category whose decisive signatures also fired.
            runner_up = [c for c in cards if c.category == category and c.id != card.id
                         and card_scores.get(c.id, 0.0) >= 0.5]
            if runner_up:
                alt = max(runner_up, key=lambda c: card_scores[c.id])
                # never above the chosen card (which may have won on the first failure)
                ratio = min(1.0, card_scores[alt.id] / card_scores[card.id])
                entries.append((alt, score * 0.9 * ratio))
        for chosen, entry_score in entries:
            rc = _cause(category, chosen, entry_score, total, report, evidence[category],
                        why[category])
            rc.kinds = frozenset(kinds.get(category, ()))
            rc.card_matched = chosen is not None and (
                bool(card_scores.get(chosen.id)) or chosen.id in near_cards)
            causes.append(rc)
            keys[id(rc)] = order(category, entry_score)
    causes.sort(key=lambda c: (*keys[id(c)], c.card or ""))
    causes = causes[:5]
    for rc in causes:
        rc.clues = (round(clue.get(rc.category, 0.0), 3),
                    round(max((v for c, v in clue.items() if c != rc.category), default=0.0), 3))
    for rc in causes:  # the lead over the best other category (below the first: behind it)
        rc.margin = round(rc.confidence - max(
            (o.confidence for o in causes if o.category != rc.category), default=0.0), 3)

    # The hang rule's inference from silence is no evidence of a failure by itself: healthy
    # excerpts end after NCCL's set-up just the same (29 healthy logs: 8 were `unknown`). A
    # sign in the log that the job stopped was tried: nccl-tests' results header without a
    # row (NVIDIA/nccl-tests v2.19.6 src/util.cu) kept one real hang but also flagged one
    # healthy excerpt; a person's words that it hangs do decide it (`bot.answering.ask`).
    observed = any(not s.from_silence for s in log_sigs)
    silence_only = any(s.from_silence for s in log_sigs) and not observed \
        and not report.shows_failure
    if silence_only and not extra:  # no failure to rest on: every cause is only "unclear"
        for rc in causes:
            rc.unfailed = True
    verdict = decide_verdict(causes[0].certainty if causes else None,
                             logs_given=bool(report.sources) or not extra,
                             log_failure=report.shows_failure or observed)
    return Diagnosis(causes, cr.suspects, cr, verdict, card_scores, neighbours=neighbours,
                     silence_only=silence_only)


def _fill(ranked: Sequence[tuple[str, float]], neighbours: Sequence[Neighbour],
          listed: set[str], why: dict[str, list[str]]) -> list[tuple[str, float]]:
    """Weak candidates up to `MIN_CANDIDATES` when the evidence names fewer: first the
    categories that scored below the display line, then those of the nearest past incidents
    beyond the vote, most similar first (each below every real candidate)."""
    out: list[tuple[str, float]] = []
    for category, score in ranked:
        if category not in listed:
            out.append((category, score))
            listed.add(category)
    for n in neighbours:
        if n.score <= 0 or n.doc.category in listed:
            continue
        out.append((n.doc.category, FILL_SCALE * n.score))
        why[n.doc.category].append(_resembles([n]))
        listed.add(n.doc.category)
    return out[:max(0, MIN_CANDIDATES - (len(listed) - len(out)))]


def _resembles(voters: Sequence[Neighbour]) -> str:
    past = [n for n in voters if n.incident is not None]
    cards = [n for n in voters if n.doc.card is not None]
    parts = []
    if past:
        inc = past[0].incident
        assert inc is not None
        parts.append(f"resembles {len(past)} past incident(s), closest {inc.url} "
                     f"(similarity {past[0].score:.2f})")
    if cards:
        parts.append(f"reads like card {cards[0].doc.card} (similarity {cards[0].score:.2f})")
    return "; ".join(parts)


def _shared_lines(report: LogReport, neighbour: Neighbour, index: NeighbourIndex,
                  limit: int = 2) -> list[Evidence]:
    """The log's failure lines that have the most in common with a neighbouring incident (not
    the set-up lines: they say which transport was used, not what went wrong)."""
    scored = []
    for key, ev in report.salient.items():
        if ev is None or not ERRORISH.search(key):
            continue
        overlap = index.overlap(key, neighbour.doc)
        if overlap > 0:
            scored.append((overlap, ev))
    scored.sort(key=lambda t: -t[0])
    return [ev for _, ev in scored[:limit]]


def _cause(category: str, card: Card | None, score: float, total: float, report: LogReport,
           evidence: list[Evidence], reasons: list[str]) -> RootCause:
    card_evidence: list[Evidence] = []
    why = list(reasons)
    if card is not None:
        for hit in report.signatures.values():
            if hit.card == card.id:
                card_evidence.extend(hit.evidence[:2])
                why.insert(0, f"matched signature '{hit.signature}' of card {card.id}")
    confidence = score * (0.6 + 0.4 * score / total)
    return RootCause(category, card.id if card else None, round(min(confidence, 1.0), 2),
                     round(score, 3), _dedupe([*card_evidence, *evidence])[:5], why[:6])


def _dedupe(items: list[Evidence]) -> list[Evidence]:
    seen, out = set(), []
    for e in items:
        key = (e.file, e.line)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out
