"""A diagnosis plus the cards behind it -> an `Answer` (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.answering.contract import (
    Answer,
    Citation,
    DecidingQuestion,
    DiagnosisOut,
    EvidenceLine,
    Lang,
    LlmUse,
    PerLanguage,
    RetrievalHit,
    RootCauseOut,
    SimilarIncident,
    Verdict,
    langs_of,
    stated_certainty,
)
from bot.diagnosis.engine import Diagnosis, RootCause
from bot.diagnosis.facts import deciding_question
from bot.diagnosis.wording import reason_zh
from bot.knowledge.cards import Card
from bot.knowledge.taxonomy import category
from bot.logs.crossrank import describe, reason_in
from bot.logs.model import LogReport
from bot.render.text import cut_words

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


def next_steps(diagnosis: Diagnosis, langs: Sequence[Lang], report: LogReport | None = None,
               seen: str = "") -> PerLanguage:
    """For an uncertain answer: what would tell the leading candidates apart, then what to
    attach in general; nothing the log already shows (the first failure already found is
    quoted instead of asked for)."""
    steps: PerLanguage = {lg: [] for lg in langs}
    first = diagnosis.crossrank.first_failure
    for cid in dict.fromkeys(rc.category for rc in diagnosis.root_causes[:3]):
        tell = category(cid).tell_apart
        for lg in langs:
            if cid == "rank_crashed" and first is not None and first.evidence:
                steps[lg].append(FOUND_FIRST[lg].format(
                    who=f"rank {first.rank}" if first.rank is not None else (first.host or "?"),
                    line=cut_words(first.evidence[0].text.strip(), 120).replace("`", "'")))
                continue
            steps[lg].append(getattr(tell, lg))
    for lg in langs:
        general = [s for s in NEXT_STEPS[lg] if s not in steps[lg]]
        if report is not None and report.counts.get("nccl_version"):
            general = [s for s in general if "NCCL_DEBUG=INFO" not in s or "NCCL_DEBUG_SUBSYS"
                       not in s] if "NCCL INFO" in seen else general
        steps[lg] += follow_evidence(general, seen)
    return {lg: s[:6] for lg, s in steps.items()}


FOUND_FIRST = {
    "en": "The log already shows {who} failing first: `{line}`. Fix that error; the other "
          "ranks' timeouts follow from it.",
    "zh": "日志已经显示 {who} 最先出错：`{line}`。先解决这个错误，其他 rank 的超时是它引起的。",
}

#: Framework names: a step that names one appears only when the log or question shows it.
FRAMEWORKS = ("horovod", "deepspeed", "verl", "openrlhf", "megatron", "lightning",
              "accelerate", "vllm", "sglang", "nemo", "trl", "ray", "fairseq", "colossalai",
              "determined", "llamafactory", "llama-factory")
_FRAMEWORK = re.compile(r"\b(" + "|".join(re.escape(f) for f in FRAMEWORKS) + r")\b",
                        re.IGNORECASE)


def shown_text(report: LogReport | None, question: str = "") -> str:
    """What the reader gave: the question and the log's kept lines (lower case)."""
    parts = [question]
    if report is not None:
        parts += report.salient.lines()
        parts += [f"{k} {v}" for k, v in report.versions.items()]
        parts += [f"{k} {v}" for k, v in report.env.items()]
    return "\n".join(parts).lower()


_GREP = re.compile(r"grep\s+(?:-\w+\s+)*[\"']([^\"']+)[\"']")


def follow_evidence(steps: Sequence[str], seen: str,
                    found: Sequence[EvidenceLine] = (), lang: str = "en") -> list[str]:
    """The steps, less those for a framework that neither the log nor the question shows;
    a step that searches the logs for a line already `found` shows that line instead."""
    out = []
    for step in steps:
        named = {m.lower() for m in _FRAMEWORK.findall(step)}
        if named and not any(re.search(rf"\b{re.escape(n)}\b", seen) for n in named):
            continue
        hit = _already_found(step, found)
        if hit is not None:
            line = cut_words(" ".join(hit.text.split()).replace("`", "'"), 60)
            step = FOUND_LINE["zh" if lang == "zh" else "en"].format(
                where=f"{hit.file}:{hit.line}", line=line)
        out.append(step)
    return out


FOUND_LINE = {"en": "The log already shows it ({where}): `{line}`.",
              "zh": "日志里已经有这一行（{where}）：`{line}`。"}


def _already_found(step: str, found: Sequence[EvidenceLine]) -> EvidenceLine | None:
    """The evidence line a step's `grep "A\\|B"` would find, if any."""
    m = _GREP.search(step)
    if m is None or not found:
        return None
    words = [w for w in re.split(r"\\\||\|", m.group(1)) if len(w) >= 4]
    return next((e for e in found if any(w in e.text for w in words)), None)


def card_brief(card: Card, lang: str = "both") -> Citation:
    """A card as a citation: its titles, sources, and whether every claim quotes a source."""
    return Citation(card=card.id, title={lg: getattr(card.title, lg) for lg in langs_of(lang)},
                    sources=card.source_urls, verified=card.verified)


def why_in(reason: str, lang: str) -> str:
    """A reason behind a cause in `lang` (zh: from the one table of reasons,
    `bot.diagnosis.wording`; a reason it does not know as it is)."""
    return reason_zh(reason) if lang == "zh" else reason


def root_cause_out(rc: RootCause, card: Card | None, langs: Sequence[Lang],
                   verdict: Verdict | None = None) -> RootCauseOut:
    """A cause as the answer states it (its certainty as the `verdict` tells it,
    `stated_certainty`)."""
    cat = category(rc.category)
    word = stated_certainty(rc.certainty, verdict) if verdict else rc.certainty
    # a Chinese answer's reasons in Chinese (with both languages, the English ones)
    why = [why_in(w, "zh" if list(langs) == ["zh"] else "en") for w in rc.why]
    if card is None and rc.local is not None:  # something new this team resolved: its title
        return RootCauseOut(
            category=rc.category, card=None, confidence=rc.confidence, certainty=word,
            evidence=[e.out() for e in rc.evidence],
            category_name={lg: getattr(cat, lg) for lg in langs}, why=why,
            title={lg: rc.local.title for lg in langs}, remediation={}, local=rc.local.id,
            kinds=sorted(rc.kinds))
    return RootCauseOut(
        category=rc.category, card=rc.card, confidence=rc.confidence,
        certainty=word,
        evidence=[e.out() for e in rc.evidence],
        category_name={lg: getattr(cat, lg) for lg in langs}, why=why,
        title={lg: getattr(card.title, lg) for lg in langs} if card else {},
        remediation={lg: list(getattr(card.remediation, lg)) for lg in langs} if card else {},
        matched=rc.card_matched and card is not None, kinds=sorted(rc.kinds))


@dataclass(frozen=True)
class Asked:
    """What a question adds to the answer of its diagnosis (`bot.answering.ask.compose`): the question,
    whether it points at one card, its retrieval hits, the text for a question beside a
    healthy log, and the steps that tell its candidates apart (None: the diagnosis's own)."""

    question: str
    specific: bool
    retrieval: Sequence[RetrievalHit] = ()
    text: str = ""
    next_steps: PerLanguage | None = None


def build_answer(
    diagnosis: Diagnosis,
    cards: Sequence[Card],
    report: LogReport | None = None,
    lang: str = "both",
    verdict: Verdict | None = None,
    question: str = "",
    facts: Mapping[str, str] | None = None,
    *,
    asked: Asked | None = None,
    headline: str | Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
    llm: LlmUse | None = None,
) -> Answer:
    """The answer: the diagnosis with its cards' steps when it is decided, what would tell
    the candidates apart when it is not. `verdict` overrides the diagnosis's (a question
    may decide it, see `decide_verdict`). Built once, with what the caller adds: the
    question's part (`asked`), a `headline` (one for every language, or one per language: a
    hang sample's), the `notes` and the `llm` field."""
    by_id = {c.id: c for c in cards}
    langs = langs_of(lang)
    one = "zh" if list(langs) == ["zh"] else "en"  # the language of one-language fields
    verdict = verdict or diagnosis.verdict
    root_causes = [root_cause_out(rc, by_id.get(rc.card or ""), langs, verdict)
                   for rc in diagnosis.root_causes]
    top = root_causes[0] if root_causes else None
    top_card = by_id.get(top.card or "") if top else None
    # a card's steps only when the answer is decided and that card's own evidence matched
    confident = verdict == "diagnosed" and top_card is not None and diagnosis.root_causes[0] \
        .card_matched
    seen = shown_text(report, question)
    cited: list[Citation] = []
    for rc in diagnosis.root_causes:
        card = by_id.get(rc.card or "")
        if card is not None and all(c.card != card.id for c in cited):
            cited.append(card_brief(card, lang))
    heads = {lg: headline if isinstance(headline, str) else headline[lg]
             if headline is not None and lg in headline else
             headline_text(diagnosis, by_id, verdict, report, lg) for lg in langs}
    deciding = None
    if verdict == "unknown" and diagnosis.root_causes:
        q = deciding_question([(rc.category, rc.confidence) for rc in diagnosis.root_causes],
                              facts or {})
        if q is not None:
            deciding = DecidingQuestion(id=q.id, text={lg: q.text(lg) for lg in langs},
                                        answers=list(q.answers),
                                        sources=[str(b.source) for b in q.basis])
    return Answer(
        verdict=verdict,
        summary=heads.get("en") or next(iter(heads.values())),
        headline=heads,
        deciding=deciding,
        facts=dict(facts or {}),
        diagnosis=DiagnosisOut(
            verdict=verdict, root_causes=root_causes,
            suspects=[s.out().model_copy(update={"reason": reason_in(s.reason, one)})
                      for s in diagnosis.suspects],
            ranks=describe(diagnosis.crossrank, report.world_size if report else None, one)),
        remediation={lg: follow_evidence(getattr(top_card.remediation, lg), seen,
                                         root_causes[0].evidence, lg)
                     if confident and top_card else [] for lg in langs},
        verify={lg: list(getattr(top_card.verify, lg)) if confident and top_card else []
                for lg in langs},
        citations=cited,
        similar_incidents=similar_incidents(diagnosis),
        probes=sorted({p for rc in diagnosis.root_causes[:2]
                       for p in (by_id[rc.card].probes if rc.card in by_id else [])}),
        next_steps=asked.next_steps if asked is not None and asked.next_steps is not None
        else next_steps(diagnosis, langs, report, seen) if verdict != "diagnosed" else None,
        input=report.summary() if report is not None else None,
        lang=lang if lang in ("en", "zh", "both") else None,
        notes=list(notes),
        llm=llm,
        question=asked.question if asked is not None else None,
        specific=asked.specific if asked is not None else None,
        text=asked.text if asked is not None else "",
        retrieval=list(asked.retrieval) if asked is not None else [],
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
        SimilarIncident(source=inc.url, title=inc.title, title_zh=inc.title_zh,
                        category=inc.category,
                        resolution=inc.resolution, resolution_zh=inc.resolution_zh,
                        score=round(min(1.0, n.score), 2))
        for n in diagnosis.neighbours
        if (inc := n.incident) is not None and n.score >= SIMILAR_FLOOR and inc.accepted & top
    ]][:SIMILAR_MAX]


NO_FAILURE = {
    "en": "The log shows no failure: read {what}, and found no NCCL error, watchdog timeout, "
          "traceback or signal.",
    "zh": "日志中没有发现故障：读取了 {what}，没有 NCCL 报错、watchdog 超时、Traceback 或信号。",
}
DOES_NOT_SAY = {"en": "{shows}; the log does not show why.", "zh": "{shows}，日志没有说明原因。"}
MOST_LIKELY = {"en": "Most likely: {cats}.", "zh": "最可能的原因：{cats}。"}
OR = {"en": ", or ", "zh": "，或"}
UNCLEAR_Q = {"en": "Unclear from the question alone.", "zh": "仅凭问题无法确定。"}


def what_was_read(report: LogReport | None, lang: str) -> str:
    if report is None:
        return ""
    files, lines = len(report.sources), report.total_lines
    ranks = len(report.ranks)
    if lang == "zh":
        return f"{files} 个文件、{lines} 行" + (f"、{ranks} 个 rank" if ranks else "")
    return (f"{files} file{'s' if files != 1 else ''}, {lines} line{'s' if lines != 1 else ''}"
            + (f", {ranks} rank{'s' if ranks != 1 else ''}" if ranks else ""))


def _duration(ms: int | None, lang: str) -> str:
    if not ms:
        return ""
    if ms >= 60_000:
        v = f"{ms / 60_000:.3g}"
        return f"{v} 分钟" if lang == "zh" else f"{v} min"
    v = f"{ms / 1000:.3g}"
    return f"{v} 秒" if lang == "zh" else f"{v} s"


def log_shows(report: LogReport | None, diagnosis: Diagnosis, lang: str) -> str:
    """What the log shows, in plain words (no cause): the collective that timed out, the
    rank that failed first, or the first failure line."""
    if report is None:
        return ""
    cr = diagnosis.crossrank
    if report.timeouts:
        suspect = cr.suspects[0].rank if cr.suspects else None
        t = next((x for x in report.timeouts if x.rank == suspect), report.timeouts[0])
        op = t.op or "collective"
        seq = f" (SeqNum {t.seq})" if t.seq is not None else ""
        after = _duration(t.timeout_ms, lang)
        many = len(cr.timeout_ranks) > 1
        if lang == "zh":
            who = f"{len(cr.timeout_ranks)} 个 rank" if many else (
                f"rank {t.rank} " if t.rank is not None else "")
            return f"{who}的 {op}{seq.replace(' (', '（').replace(')', '）')}" + \
                (f"在 {after} 后超时" if after else "超时")
        who = (f"{len(cr.timeout_ranks)} ranks timed out in" if many else
               f"Rank {t.rank}'s" if t.rank is not None else "The")
        verb = "" if many else " timed out"
        return f"{who} {op}{seq}{verb}" + (f" after {after}" if after else "")
    first = cr.first_failure
    if first is not None and first.rank is not None:
        reason = cut_words(first.reason.split(";")[0].strip(), 70)
        return (f"rank {first.rank} 最先出错（{reason}）" if lang == "zh"
                else f"Rank {first.rank} failed first ({reason})")
    lines = [e for rc in diagnosis.root_causes[:1] for e in rc.evidence]
    if lines:
        text = cut_words(lines[0].text.strip().replace("`", "'"), 90)
        return f"日志报告：“{text}”" if lang == "zh" else f"The log reports “{text}”"
    return "日志显示有故障" if lang == "zh" else "The log shows a failure"


def headline_text(diagnosis: Diagnosis, by_id: Mapping[str, Card], verdict: str,
                  report: LogReport | None, lang: str) -> str:
    """The first line of an answer (see `Answer.headline`)."""
    words = CERTAINTY_WORDS["zh" if lang == "zh" else "en"]
    if verdict == "no_evidence":
        return NO_FAILURE[lang].format(what=what_was_read(report, lang) or "-")
    if not diagnosis.root_causes:
        return ("未知：证据与已知的根因都不相符。" if lang == "zh"
                else "Unknown: the evidence fits no known root cause.")
    rc = diagnosis.root_causes[0]
    card = by_id.get(rc.card or "")
    who = _suspect(diagnosis, lang)
    if card is not None and rc.card_matched and rc.certainty != "weak":
        sep = "：" if lang == "zh" else ": "
        word = words[rc.certainty] if verdict == "diagnosed" or rc.certainty != "likely" \
            else words["possible"]
        title = getattr(card.title, lang).rstrip("。.")
        return f"{word}{sep}{title}{'。' if lang == 'zh' else '.'}{who}"
    if rc.local is not None and rc.certainty != "weak":
        # the team's own resolved incident is this cause's own evidence (its nearest match)
        sep = "：" if lang == "zh" else ": "
        word = words[rc.certainty] if verdict == "diagnosed" or rc.certainty != "likely" \
            else words["possible"]
        title = rc.local.title.rstrip("。.")
        return f"{word}{sep}{title}{'。' if lang == 'zh' else '.'}{who}"
    cats = list(dict.fromkeys(x.category for x in diagnosis.root_causes))
    lead = [c for i, c in enumerate(cats[:3])
            if i == 0 or next(x for x in diagnosis.root_causes if x.category == c).certainty
            != "weak"][:2]
    if len(lead) < 2 and len(cats) > 1:
        lead = cats[:2]
    names = OR[lang].join(category(c).short(lang) for c in lead)
    shows = log_shows(report, diagnosis, lang) if report is not None else ""
    if verdict == "diagnosed" and rc.certainty == "likely":
        sep = "：" if lang == "zh" else ": "
        first = f"{words['likely']}{sep}{category(rc.category).short(lang)}"
        end = "。" if lang == "zh" else "."
        return first + (f"{end} {shows}{end}" if shows and lang != "zh" else
                        f"{end}{shows}{end}" if shows else end)
    head = DOES_NOT_SAY[lang].format(shows=shows) if shows else UNCLEAR_Q[lang]
    return f"{head} {MOST_LIKELY[lang].format(cats=names)}".replace("。 ", "。")


def _suspect(diagnosis: Diagnosis, lang: str) -> str:
    if not diagnosis.suspects:
        return ""
    s = diagnosis.suspects[0]
    parts = [x for x in (f"rank {s.rank}" if s.rank is not None else "", s.host or "") if x]
    if not parts:
        return ""
    return f"可疑：{' '.join(parts)}。" if lang == "zh" else f" Suspect: {', '.join(parts)}."
