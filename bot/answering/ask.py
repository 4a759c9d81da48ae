"""`ncclbot ask`: a question (and optional logs) -> an `Answer` (deterministic).

How the question and the log combine:
- retrieval ranks cards for the question (BM25 + dense, plus the log's signatures when given);
- the question's own evidence becomes one `Signal` per candidate category, strength
  `scale x 0.6^i` for the i-th category by question-only fused score, and goes into
  `diagnose()` next to the log's rules and signatures (noisy-OR);
- scale is 0.2 when the log alone is decisive (verdict "diagnosed"), so the log dominates,
  0.8 when the question is specific, 0.45 when it is vague (0.2 was chosen on the real
  cases in ../shared/eval and the (then) held-out fixtures: 0.15-0.2 keep every log-decided
  answer, 0.3 let a question's wording outvote the log, 0.1 loses top-3 answers);
- a question is specific when its best card ranks first in both channels, or in the top two
  of both with a distinctive matched term (one that occurs in at most 3 cards);
- the verdict is `decide_verdict`'s, with the question's specificity as its grounding;
- when the answer is unclear, `next_steps` says what would tell the candidates apart,
  built from the candidates' categories and their cards' node probes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.answering.answer import Asked, build_answer, follow_evidence, shown_text
from bot.answering.contract import (
    DIAGNOSED_FROM,
    Answer,
    Lang,
    LlmUse,
    PerLanguage,
    Verdict,
    decide_verdict,
    langs_of,
    resolve_lang,
)
from bot.config import Settings
from bot.diagnosis.engine import Diagnosis, cap_by_log, diagnose, reports_hang
from bot.diagnosis.nearest import Neighbour, VoteParams, category_votes
from bot.diagnosis.rules import Signal
from bot.knowledge.cards import Card
from bot.knowledge.taxonomy import load_taxonomy
from bot.logs.model import LogReport
from bot.retrieval.fusion import DEFAULT_WEIGHTS, K

if TYPE_CHECKING:
    from bot.retrieval.search import Hit

QUESTION_CHANNELS = ("bm25", "dense")
DECAY = 0.6
SCALE_LOG_DECISIVE, SCALE_SPECIFIC, SCALE_VAGUE = 0.2, 0.8, 0.45
DISTINCTIVE_DF = 3
#: The weight of the past incidents a question resembles (their category vote), next to the
#: cards' retrieval, unless the log is decisive: chosen by grouped cross-validation over the
#: corpus's own questions (`benchmarks/eval_cases.py --questions --tune`: 0.5 -> 3.0 raised
#: top-1 steadily; 2.0 and 3.0 are within two cases, and the smaller leans less on questions
#: written by the people who collected the incidents).
ASKED_WEIGHT = 2.0
ASKED_VOTES = VoteParams()
#: a signal is a probability-like strength: never 1 or more, whatever the weight
ASKED_CAP = 0.95

#: What tells a category apart from the others: (en, zh), from the taxonomy's `tell_apart`.
DISCRIMINATORS: dict[str, tuple[str, str]] = {
    c.id: (c.tell_apart.en, c.tell_apart.zh) for c in load_taxonomy()}
ATTACH_LOG = ("Attach the crash log (`--log FILE`), at least of the rank that failed first.",
              "请附上崩溃日志（`--log FILE`），至少包括最先出错的那个 rank。")
PROBE_STEP = ("Run `ncclbot node {p}` on the affected node and attach the output.",
              "在出问题的节点上运行 `ncclbot node {p}`，并附上输出。")


def question_score(hit: Hit) -> float:
    """A hit's fused score from the question's channels only (not the log's signatures)."""
    return sum(DEFAULT_WEIGHTS[c] / (K + hit.channels[c].rank)
               for c in QUESTION_CHANNELS if c in hit.channels)


def is_specific(hits: Sequence[Hit], distinctive: set[str]) -> bool:
    """Whether the question points at one card (see the module docstring)."""
    ranked = sorted(hits, key=question_score, reverse=True)
    if not ranked:
        return False
    ch = ranked[0].channels
    ranks = [ch[c].rank if c in ch else 99 for c in QUESTION_CHANNELS]
    terms = (ch["bm25"].reason if "bm25" in ch else "").removeprefix("terms ").split(", ")
    return max(ranks) == 1 or (max(ranks) <= 2 and bool(distinctive & set(terms)))


def question_signals(hits: Sequence[Hit], scale: float) -> list[Signal]:
    """One signal per candidate category from the question's retrieval."""
    best: dict[str, Hit] = {}
    for h in sorted(hits, key=question_score, reverse=True):
        if question_score(h) > 0:
            best.setdefault(h.category, h)
    return [Signal(cat, round(scale * DECAY ** i, 3),
                   f"the question matches card {h.card} ({'; '.join(h.why[:2])})")
            for i, (cat, h) in enumerate(best.items())]


def next_steps(categories: Sequence[str], cards: Sequence[Card], has_log: bool,
               langs: Sequence[Lang], hang: bool = False, seen: str = "") -> PerLanguage:
    """What would tell the candidate categories apart, in order of the candidates (a live
    hang probe only when the log shows a hang; a framework's step only when it is seen)."""
    steps: list[tuple[str, str]] = [] if has_log else [ATTACH_LOG]
    for cat in dict.fromkeys(categories):
        if cat in DISCRIMINATORS and DISCRIMINATORS[cat] not in steps:
            steps.append(DISCRIMINATORS[cat])
    probes = dict.fromkeys(p for c in cards for p in c.probes)
    mentioned = " ".join(en for en, _ in steps)
    for p in probes:
        if p == "hang" and not hang:
            continue
        if f"ncclbot node {p}" not in mentioned:
            steps.append((PROBE_STEP[0].format(p=p), PROBE_STEP[1].format(p=p)))
    kept = [s for s in steps if follow_evidence([s[0]], seen)]
    return {lg: [s[0 if lg == "en" else 1] for s in kept[:6]] for lg in langs}


def asked_signals(asked: Sequence[Neighbour], weight: float = ASKED_WEIGHT) -> list[Signal]:
    """The category vote of the past incidents the question resembles, as signals."""
    out = []
    for cat, share in sorted(category_votes(asked, ASKED_VOTES).items(), key=lambda kv: -kv[1]):
        voter = next((n for n in asked if cat in n.doc.accepted and n.incident), None)
        where = f" (closest {voter.incident.url})" if voter and voter.incident else ""
        out.append(Signal(cat, round(min(weight * share, ASKED_CAP), 3),
                          f"the question resembles past incidents of this cause{where}"))
    return out


def agree(read: Sequence[Signal], resembles: Sequence[Signal]) -> str | None:
    """The family both readings of a question put first, if they agree: the card it reads
    most like (`question_signals`) and what most of the past threads whose questions resemble
    it turned out to be (`asked_signals`); None otherwise. Question-only leads said
    `possible` where only the past threads put them first were right 1 of 5, 3 of 6 and 1
    of 2 times on the dev threads no card cites (grouped, leave-one-repo-out, time-ordered
    CV, cuts fit in each split's training threads, benchmarks/calibration.py), against
    12/14, 13/17 and 5/5 where both did."""
    if read and resembles and read[0].category == resembles[0].category:
        return read[0].category
    return None


@dataclass
class Composed:
    """What the question and the log decide, before it is put in words."""

    diagnosis: Diagnosis
    specific: bool
    verdict: Verdict
    has_log: bool


def compose_diagnosis(question: str, cards: Sequence[Card], hits: Sequence[Hit],
                      report: LogReport | None = None, log_diagnosis: Diagnosis | None = None,
                      distinctive: set[str] | None = None, asked: Sequence[Neighbour] = (),
                      asked_weight: float = ASKED_WEIGHT,
                      facts: Mapping[str, str] | None = None) -> Composed:
    """Pure: the question, its retrieval hits, the past incidents it resembles (`asked`) and
    the optional log analysis -> the ranked diagnosis and its verdict."""
    log_decisive = log_diagnosis is not None and log_decides(log_diagnosis)
    specific = is_specific(hits, distinctive or set())
    scale = SCALE_LOG_DECISIVE if log_decisive else SCALE_SPECIFIC if specific else SCALE_VAGUE
    has_log = report is not None and report.evidence_found
    # a decisive log is not outvoted by what the question resembles
    resembles = [] if log_decisive else asked_signals(asked, asked_weight)
    read = question_signals(hits, scale)
    extra = [*read, *resembles]
    diagnosis = diagnose(report or LogReport(), cards, extra=extra,
                         neighbours=log_diagnosis.neighbours if log_diagnosis else None,
                         facts=facts)
    for rc in diagnosis.root_causes:
        if agree(read, resembles) == rc.category:
            rc.kinds = rc.kinds | {"asked"}
    if log_diagnosis is not None and report is not None:
        cap_by_log(diagnosis, log_diagnosis)
    by_cat: dict[str, str] = {}
    ranked = sorted(hits, key=question_score, reverse=True)
    for h in ranked:
        by_cat.setdefault(h.category, h.card)
    for rc in diagnosis.root_causes:
        if (rc.category in by_cat and not diagnosis.card_scores.get(rc.card or "")
                and rc.local is None):  # the team's own resolution keeps its card (or none)
            rc.card = by_cat[rc.category]
            # a question that points at one card is that card's own evidence
            rc.card_matched = rc.card_matched or (specific and rc.card == ranked[0].card)
    if specific and ranked:
        for rc in diagnosis.root_causes:
            if rc.card == ranked[0].card:
                rc.kinds = rc.kinds | {"specific"}
    top = diagnosis.root_causes[0] if diagnosis.root_causes else None
    # NCCL's set-up and then silence is evidence of a hang when the question says it hangs
    told = log_diagnosis is not None and log_diagnosis.silence_only and reports_hang(question)
    verdict = decide_verdict(top.certainty if top else None, logs_given=report is not None,
                             log_failure=has_log or told or (
                                 log_diagnosis is not None
                                 and log_diagnosis.verdict != "no_evidence"),
                             grounded_question=specific)
    return Composed(diagnosis, specific, verdict, has_log)


def log_decides(diagnosis: Diagnosis) -> bool:
    """Whether a log's own diagnosis is firm enough that a question only breaks ties."""
    top = diagnosis.root_causes[0] if diagnosis.root_causes else None
    return diagnosis.verdict != "no_evidence" and top is not None and \
        top.confidence >= DIAGNOSED_FROM


def compose(question: str, cards: Sequence[Card], hits: Sequence[Hit], lang: str = "both",
            report: LogReport | None = None, log_diagnosis: Diagnosis | None = None,
            distinctive: set[str] | None = None, asked: Sequence[Neighbour] = (),
            asked_weight: float = ASKED_WEIGHT, facts: Mapping[str, str] | None = None,
            *, notes: Sequence[str] = (), llm: LlmUse | None = None) -> Answer:
    """Pure: `compose_diagnosis` put in words (an `Answer`, with `notes` and `llm`)."""
    c = compose_diagnosis(question, cards, hits, report, log_diagnosis, distinctive, asked,
                          asked_weight, facts)
    diagnosis, verdict = c.diagnosis, c.verdict
    text = ""
    if verdict == "no_evidence" and diagnosis.root_causes:
        # one text for the answer: with both languages, the question's own (Slack keeps a
        # thread's answer in both and shows it in the thread's, chosen by the question)
        from bot.retrieval.tokenize import has_cjk

        zh = lang == "zh" or (lang == "both" and has_cjk(question))
        text = about_question(diagnosis, cards, "zh" if zh else "en")
    steps = None
    if verdict != "diagnosed":
        cats = [rc.category for rc in diagnosis.root_causes[:4]]
        chosen = [k for k in cards if k.id in {rc.card for rc in diagnosis.root_causes[:3]}]
        steps = next_steps(cats, chosen, report is not None, langs_of(lang),
                           hang=bool(report is not None and report.timeouts),
                           seen=shown_text(report, question))
    framed = Asked(question, c.specific, [h.out() for h in hits],
                   text, steps)
    return build_answer(diagnosis, cards, report, lang, verdict, question, facts, asked=framed,
                        notes=notes, llm=llm)


ABOUT = {
    "en": "About your question: nothing in the log points at a cause. If the job still fails "
          "or hangs, your words fit {cats}{card} best; the steps below say what would tell "
          "them apart.",
    "zh": "关于你的问题：日志里没有指向任何原因的证据。如果任务仍然失败或卡住，你的描述最接近"
          "{cats}{card}；下面的步骤说明如何区分。",
}


def about_question(diagnosis: Diagnosis, cards: Sequence[Card], lang: str) -> str:
    """A question beside a healthy log, answered as a question: the causes it reads like."""
    from bot.knowledge.taxonomy import category

    cats = list(dict.fromkeys(rc.category for rc in diagnosis.root_causes))[:2]
    names = ("，或" if lang == "zh" else ", or ").join(category(c).short(lang) for c in cats)
    by_id = {c.id: c for c in cards}
    top = diagnosis.root_causes[0]
    card = by_id.get(top.card or "") if top.card_matched else None
    title = getattr(card.title, lang) if card else ""
    shown = (f"（参见“{title}”）" if lang == "zh" else f" (see “{title}”)") if title else ""
    return ABOUT[lang].format(cats=names, card=shown)


def answer_question(question: str, log_paths: Sequence[str] = (), lang: str = "both",
                    settings: Settings | None = None,
                    analysis: tuple[LogReport, Diagnosis] | None = None,
                    facts: Mapping[str, str] | None = None, *, notes: Sequence[str] = (),
                    llm: LlmUse | None = None) -> Answer:
    """Answer a question, with optional log files (or their `analysis`, already made): the
    answer of `analyze` plus `question`, `lang`, `specific` and `retrieval`; the logs'
    reading problems, then `notes`, as its notes."""
    from bot.answering.analysis import analyze_sources, source_notes
    from bot.answering.knowledge import bundled_cards, question_index
    from bot.config import load_settings
    from bot.logs.sources import expand_inputs
    from bot.retrieval.search import get_retriever

    settings = settings or load_settings()
    out_lang = resolve_lang(question, lang)
    cards = list(bundled_cards())
    if analysis is not None:
        report, base = analysis
    elif log_paths:
        report, base = analyze_sources(expand_inputs(log_paths), settings, cards)
    else:
        report, base = None, None
    retriever = get_retriever(settings, cards)
    hits = retriever.search(question, 8, base)
    asked = question_index(settings.cache_dir).nearest(question, ASKED_VOTES.k)
    read = source_notes(report) if report is not None else []
    return compose(question, cards, hits, out_lang, report, base,
                   retriever.sparse.distinctive(DISTINCTIVE_DF), asked, facts=facts,
                   notes=[*read, *notes], llm=llm)
