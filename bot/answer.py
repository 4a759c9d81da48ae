"""A diagnosis plus the cards behind it -> an `Answer` (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.contract import (
    Answer,
    Citation,
    DiagnosisOut,
    EvidenceLine,
    Lang,
    PerLanguage,
    RootCauseOut,
    SimilarIncident,
    SuspectOut,
    Verdict,
    langs_of,
)
from bot.diagnosis.engine import Diagnosis, RootCause
from bot.knowledge.cards import Card
from bot.knowledge.taxonomy import category
from bot.logs.crossrank import describe
from bot.logs.model import LogReport

#: A candidate's certainty in words, per language (the Slack message and the terminal).
CERTAINTY_WORDS: dict[str, dict[str, str]] = {
    "en": {"likely": "Likely", "possible": "Possibly", "weak": "Unclear"},
    "zh": {"likely": "很可能", "possible": "可能", "weak": "不确定"},
}

NEXT_STEPS = {
    "en": [
        "Attach the log of every rank (or at least of the rank that failed first), not only rank 0.",
        "Re-run with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET) so NCCL's transport choices and "
        "errors are in the log.",
        "Set TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1 to get a Flight Recorder "
        "dump of the last collectives of each rank on a timeout.",
        "Run `ncclbot node env` and `ncclbot node topo` on the suspect node and attach the output.",
    ],
    "zh": [
        "请附上所有 rank 的日志（至少包括最先出错的那个 rank），不要只给 rank 0 的。",
        "设置 NCCL_DEBUG=INFO（以及 NCCL_DEBUG_SUBSYS=INIT,NET）后重跑，让日志里包含 NCCL 的传输选择和报错。",
        "设置 TORCH_NCCL_TRACE_BUFFER_SIZE=2000 和 TORCH_NCCL_DUMP_ON_TIMEOUT=1，超时时会导出每个 rank "
        "最近集合通信的 Flight Recorder 记录。",
        "在可疑节点上运行 `ncclbot node env` 和 `ncclbot node topo`，并附上输出。",
    ],
}


def next_steps(diagnosis: Diagnosis, langs: Sequence[Lang]) -> PerLanguage:
    """For an uncertain answer: what would tell the leading candidates apart, then what to
    attach in general."""
    steps: PerLanguage = {lg: [] for lg in langs}
    for cid in dict.fromkeys(rc.category for rc in diagnosis.root_causes[:3]):
        tell = category(cid).tell_apart
        for lg in langs:
            steps[lg].append(getattr(tell, lg))
    for lg in langs:
        steps[lg] += [s for s in NEXT_STEPS[lg] if s not in steps[lg]]
    return {lg: s[:6] for lg, s in steps.items()}


def card_brief(card: Card, lang: str = "both") -> Citation:
    """A card as a citation: its titles, sources, and whether every claim quotes a source."""
    return Citation(card=card.id, title={lg: getattr(card.title, lg) for lg in langs_of(lang)},
                    sources=card.source_urls, verified=card.verified)


def root_cause_out(rc: RootCause, card: Card | None, langs: Sequence[Lang]) -> RootCauseOut:
    cat = category(rc.category)
    if card is None and rc.local is not None:  # something new this team resolved: its title
        return RootCauseOut(
            category=rc.category, card=None, confidence=rc.confidence, certainty=rc.certainty,
            evidence=[EvidenceLine.model_validate(e.to_dict()) for e in rc.evidence],
            category_name={lg: getattr(cat, lg) for lg in langs}, why=list(rc.why),
            title={lg: rc.local.title for lg in langs}, remediation={}, local=rc.local.id)
    return RootCauseOut(
        category=rc.category, card=rc.card, confidence=rc.confidence,
        certainty=rc.certainty,
        evidence=[EvidenceLine.model_validate(e.to_dict()) for e in rc.evidence],
        category_name={lg: getattr(cat, lg) for lg in langs}, why=list(rc.why),
        title={lg: getattr(card.title, lg) for lg in langs} if card else {},
        remediation={lg: list(getattr(card.remediation, lg)) for lg in langs} if card else {})


def build_answer(
    diagnosis: Diagnosis,
    cards: Sequence[Card],
    report: LogReport | None = None,
    lang: str = "both",
    verdict: Verdict | None = None,
) -> Answer:
    """The answer: the diagnosis with its cards' steps when it is decided, what would tell
    the candidates apart when it is not. `verdict` overrides the diagnosis's (a question
    may decide it, see `decide_verdict`)."""
    by_id = {c.id: c for c in cards}
    langs = langs_of(lang)
    root_causes = [root_cause_out(rc, by_id.get(rc.card or ""), langs)
                   for rc in diagnosis.root_causes]
    top = root_causes[0] if root_causes else None
    verdict = verdict or diagnosis.verdict
    top_card = by_id.get(top.card or "") if top else None
    confident = verdict == "diagnosed" and top_card is not None
    cited: list[Citation] = []
    for rc in diagnosis.root_causes:
        card = by_id.get(rc.card or "")
        if card is not None and all(c.card != card.id for c in cited):
            cited.append(card_brief(card, lang))
    return Answer(
        verdict=verdict,
        summary=summary_line(diagnosis, by_id, verdict),
        diagnosis=DiagnosisOut(
            verdict=verdict, root_causes=root_causes,
            suspects=[SuspectOut.model_validate(s.to_dict()) for s in diagnosis.suspects],
            ranks=describe(diagnosis.crossrank, report.world_size if report else None)),
        remediation={lg: list(getattr(top_card.remediation, lg)) if confident and top_card
                     else [] for lg in langs},
        verify={lg: list(getattr(top_card.verify, lg)) if confident and top_card else []
                for lg in langs},
        citations=cited,
        similar_incidents=similar_incidents(diagnosis),
        probes=sorted({p for rc in diagnosis.root_causes[:2]
                       for p in (by_id[rc.card].probes if rc.card in by_id else [])}),
        next_steps=next_steps(diagnosis, langs) if verdict != "diagnosed" else None,
        input=report.summary() if report is not None else None,
        lang=lang if lang in ("en", "zh", "both") else None,
    )


#: A past incident is shown as "seen before" from this similarity on (cosine, 0..1).
SIMILAR_FLOOR = 0.2
SIMILAR_MAX = 3


def similar_incidents(diagnosis: Diagnosis) -> list[SimilarIncident]:
    """The closest past incidents above the floor whose cause is the leading candidate (or
    another that is more than weak): what fixed it before. An incident that only shares
    boilerplate lines with the log is not shown."""
    top = {rc.category for i, rc in enumerate(diagnosis.root_causes[:3])
           if i == 0 or rc.certainty != "weak"}
    own = [
        SimilarIncident(source=loc.url, title=loc.title, category=loc.category,
                        resolution=loc.resolution, score=round(min(1.0, n.score), 2),
                        local=True, seen_in=loc.channel_name or loc.channel,
                        date=loc.date.isoformat(), resolved_by=loc.confirmed_by.who,
                        link=loc.link, id=loc.id)
        for n in diagnosis.neighbours
        if (loc := n.doc.local) is not None and n.score >= SIMILAR_FLOOR
        and {loc.category, *loc.secondary} & top
    ]
    return [*own, *[
        SimilarIncident(source=inc.url, title=inc.title, category=inc.category,
                        resolution=inc.resolution, score=round(min(1.0, n.score), 2))
        for n in diagnosis.neighbours
        if (inc := n.incident) is not None and n.score >= SIMILAR_FLOOR and inc.accepted & top
    ]][:SIMILAR_MAX]


def summary_line(diagnosis: Diagnosis, by_id: dict[str, Card], verdict: str) -> str:
    if verdict == "no_evidence":
        return "No failure evidence found in the log."
    if not diagnosis.root_causes:
        return "Unknown: the evidence fits no known root cause."
    rc = diagnosis.root_causes[0]
    card = by_id.get(rc.card or "")
    what = (card.title.en if card else rc.local.title if rc.local is not None
            else category(rc.category).en)
    # the words follow the certainty; an undecided answer says so first
    prefix = "Unclear; weak candidate" if rc.certainty == "weak" else "Unclear; leading candidate"
    if verdict == "diagnosed":
        prefix = {"likely": "Most likely", "possible": "Possibly"}.get(rc.certainty, prefix)
    who = ""
    if diagnosis.suspects:
        s = diagnosis.suspects[0]
        who = (
            " Suspect: "
            + ", ".join(
                x for x in (f"rank {s.rank}" if s.rank is not None else "", s.host or "") if x
            )
            + "."
        )
    return f"{prefix}: {rc.category} ({rc.confidence:.0%}) - {what}.{who}"
