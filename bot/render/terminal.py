"""Rendering an answer for a terminal with rich (pure: an `Answer` in, renderables out)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bot.answering.answer import CERTAINTY_WORDS
from bot.answering.contract import Answer, Lang
from bot.knowledge.taxonomy import category
from bot.render.lang import evidence_in
from bot.render.seen import resolution_in, seen_title
from bot.render.text import cut_words, shorten

_LANG_TITLE = {"en": "Remediation", "zh": "处理步骤"}
_VERIFY_TITLE = {"en": "Verify", "zh": "验证"}
#: Section headings: English, or Chinese when only Chinese was asked for.
_HEADINGS = {
    "en": {"ranks": "Ranks", "causes": "Root causes[/] (best first)", "suspects": "Suspects",
           "probes": "Suggested node diagnostics:", "seen": "Seen before[/] (similar past "
           "incidents and what fixed them)", "sources": "Sources", "explanation": "Explanation",
           "next": "What would help", "suspect": "Suspect", "evidence": "Evidence",
           "steps": "What to do", "seen_short": "Seen before", "fix": "fix",
           "decide": "The question that decides", "answer_with": "answer with",
           "more": "More (every cause, evidence, step and source): add --details",
           "other": "Other candidates", "similarity": "similarity",
           "unverified": "(not yet re-checked against its sources)", "card": "card",
           "rank": "rank", "host": "host", "reason": "reason", "note": "note",
           "probe": "Probe {preset} on {node}: {status}"},
    "zh": {"ranks": "各 rank 情况", "causes": "可能的根因[/]（按可能性排序）",
           "suspects": "可疑 rank", "probes": "建议的节点诊断：",
           "seen": "以前见过[/]（相似的历史事件及其解决办法）", "sources": "来源",
           "explanation": "说明", "next": "需要补充的信息", "suspect": "可疑",
           "evidence": "证据", "steps": "建议步骤", "seen_short": "以前见过", "fix": "解决",
           "decide": "能确定原因的问题", "answer_with": "回答方式",
           "more": "更多（全部原因、证据、步骤和来源）：加 --details",
           "other": "其他候选", "similarity": "相似度", "unverified": "（尚未对照来源复核）",
           "card": "卡片", "rank": "rank", "host": "主机", "reason": "原因", "note": "注意",
           "probe": "在 {node} 上运行 probe {preset}：{status}"},
}
#: The one-screen answer: at most this many evidence lines and steps, each cut to fit.
SCREEN_EVIDENCE, SCREEN_STEPS, SCREEN_SOURCES = 2, 3, 3


def _lg(answer: Answer) -> Lang:
    return "zh" if answer.lang == "zh" else "en"


def headline(answer: Answer) -> str:
    """The verdict and the suspect, in the answer's language (English unless only Chinese
    was asked for)."""
    lg = _lg(answer)
    return answer.headline.get(lg) or answer.headline.get("en") or answer.summary


def _pick(per_lang: dict, lg: str) -> list[str]:  # type: ignore[type-arg]
    return list(per_lang.get(lg) or per_lang.get("en") or per_lang.get("zh") or [])


def render_compact(answer: Answer, console: Console) -> None:
    """The default answer: one 80x40 screen (verdict, suspect, evidence, three steps, the
    deciding question, seen before, the leading card's sources); the rest is `--details`."""
    lg = _lg(answer)
    h = _HEADINGS[lg]
    sep = "：" if lg == "zh" else ": "
    width = max(40, min(console.width, 100) - 4)
    console.print(Panel(Text(headline(answer), style="bold", overflow="fold"), title="ncclbot",
                        expand=False), soft_wrap=False)
    if answer.explanation:  # the LLM agent's plain-language account
        console.print(f"[bold]{h['explanation']}[/]")
        console.print(Text(shorten(answer.explanation, 4 * width)))
    for p in answer.suggested_probes:  # proposed by the LLM agent
        console.print(Text(cut_words(h["probe"].format(preset=p.preset, node=p.node,
                                                       status=p.status)
                                     + (f" - {p.reason}" if p.reason else ""), width)))
    if answer.text:
        console.print(Text(shorten(answer.text, 3 * width)))
    diag = answer.diagnosis
    if diag.suspects and answer.verdict != "no_evidence":
        s = diag.suspects[0]
        who = " ".join(x for x in (f"rank {s.rank}" if s.rank is not None else "", s.host or "")
                       if x)
        console.print(Text(cut_words(f"{h['suspect']}{sep}{who} — {s.reason}", width)))
    top = diag.root_causes[0] if diag.root_causes else None
    if top is not None and top.evidence and answer.verdict != "no_evidence":
        console.print(f"[bold]{h['evidence']}[/]")
        for ev in top.evidence[:SCREEN_EVIDENCE]:
            where = f"{ev.file}:{ev.line}  "
            said = evidence_in(ev.line, ev.text, lg)
            console.print(Text(where, style="green") +
                          Text(cut_words(" ".join(said.split()), width - len(where))))
    steps = _pick(answer.remediation, lg) if any(answer.remediation.values()) else \
        _pick(answer.next_steps or {}, lg)
    if steps:
        console.print(f"[bold]{h['steps'] if any(answer.remediation.values()) else h['next']}[/]")
        for i, step in enumerate(steps[:SCREEN_STEPS], 1):
            console.print(Text(f" {i}. " + cut_words(step, 2 * width - 4)))
    if answer.deciding is not None:
        q = answer.deciding
        console.print(f"[bold]{h['decide']}[/]: " + escape(q.text.get(lg) or q.text.get("en", "")))
        console.print(Text(f"  {h['answer_with']}: " + " | ".join(
            f"--fact {q.id}={a}" for a in q.answers), style="dim"))
    if answer.similar_incidents:
        inc = answer.similar_incidents[0]
        console.print(Text(cut_words(f"{h['seen_short']}{sep}{seen_title(inc, lg)}", width),
                           style="bold"))
        console.print(Text(f"  {inc.source}"))
        if fix := resolution_in(inc, lg):
            console.print(Text(cut_words(f"  {h['fix']}{sep}{fix}", width), style="dim"))
    rest = [rc for rc in diag.root_causes if top is not None and rc.category != top.category]
    rest = list({rc.category: rc for rc in reversed(rest)}.values())[::-1]
    if rest and answer.verdict != "no_evidence":
        # a Chinese answer names the causes in Chinese (an English one keeps the ids)
        others = "; ".join(f"{category(rc.category).short(lg) if lg == 'zh' else rc.category} "
                           f"{CERTAINTY_WORDS[lg].get(rc.certainty or 'weak')} "
                           f"{rc.confidence:.0%}" for rc in rest[:3])
        console.print(Text(cut_words(f"{h['other']}{sep}{others}", 2 * width), style="dim"))
    lead = next((c for c in answer.citations if top is not None and c.card == top.card
                 and top.matched), None)
    if lead is not None and lead.sources:
        console.print(f"[bold]{h['sources']}[/]: " + escape(lead.card))
        for url in lead.sources[:SCREEN_SOURCES]:
            console.print(f"  {url}")
    for note in answer.notes[:3]:
        console.print(Text(shorten(f"{h['note']}: {note}", 2 * width), style="yellow"))
    if diag.root_causes or answer.citations:
        console.print(Text(h["more"], style="dim"))


def render_answer(answer: Answer, console: Console, details: bool = True) -> None:
    """The answer for a terminal: everything (`details`), or one screen (`render_compact`)."""
    if not details:
        render_compact(answer, console)
        return
    # the headline wraps (never cut) whatever the console's soft-wrap setting
    console.print(Panel(Text(headline(answer), style="bold", overflow="fold"), title="ncclbot",
                        expand=False), soft_wrap=False)
    h = _HEADINGS["zh" if answer.lang == "zh" else "en"]
    if answer.explanation:  # the LLM agent's plain-language account
        console.print(f"[bold]{h['explanation']}[/]")
        console.print(Text(answer.explanation))
    if answer.text:
        console.print(Text(answer.text))
    diag = answer.diagnosis
    if diag.ranks:
        console.print(f"[bold]{h['ranks']}[/]")
    for line in diag.ranks:
        console.print(f" - {escape(line)}")
    if diag.root_causes:
        console.print()
        console.print(f"[bold]{h['causes']}")
        for i, rc in enumerate(diag.root_causes, start=1):
            title = (rc.title.get("en") or rc.title.get("zh") or rc.category_name.get("en")
                     or rc.category_name.get("zh", ""))
            lg = _lg(answer)
            if lg == "zh":
                title = (rc.title.get("zh") or rc.category_name.get("zh") or title)
            word = CERTAINTY_WORDS[lg].get(rc.certainty or "weak", "")
            console.print(
                f" {i}. [bold]{rc.category}[/] {word} "
                f"{rc.confidence:.0%}  {escape(title)}"
                + (f"  [dim]{h['card']}: {rc.card}[/]" if rc.card else "")
            )
            for why in rc.why[:3]:
                console.print(f"    [dim]- {escape(why)}[/]")
            for ev in rc.evidence[:3]:
                text = cut_words(evidence_in(ev.line, ev.text, _lg(answer)), 200)
                console.print(f"    [green]{escape(ev.file)}:{ev.line}[/]  {escape(text)}")
    if diag.suspects:
        table = Table(title=h["suspects"], show_lines=False, expand=False)
        for col in ("rank", "host", "reason"):
            table.add_column(h[col])
        for s in diag.suspects[:10]:
            table.add_row(str(s.rank) if s.rank is not None else "-", s.host or "-",
                          escape(s.reason))
        console.print(table)
    for lang, steps in answer.remediation.items():
        if steps:
            console.print(f"\n[bold]{_LANG_TITLE[lang]}[/]")
            for i, step in enumerate(steps, start=1):
                console.print(f" {i}. {escape(step)}")
    for lang, steps in answer.verify.items():
        if steps:
            console.print(f"[bold]{_VERIFY_TITLE[lang]}[/]")
            for step in steps:
                console.print(f" - {escape(step)}")
    for lang, steps in (answer.next_steps or {}).items():
        console.print(f"\n[bold]{_HEADINGS[lang]['next']}[/]")
        for step in steps:
            console.print(f" - {escape(step)}")
    if answer.probes:
        console.print(
            f"\n[bold]{h['probes']}[/] "
            + ", ".join(f"`ncclbot node {p}`" for p in answer.probes)
        )
    for p in answer.suggested_probes:  # proposed by the LLM agent
        console.print(escape(h["probe"].format(preset=p.preset, node=p.node, status=p.status))
                      + (f" - {escape(p.reason)}" if p.reason else ""))
    if answer.similar_incidents:
        console.print(f"\n[bold]{h['seen']}")
        for inc in answer.similar_incidents:
            console.print(f" - {escape(seen_title(inc, _lg(answer)))} [dim]({inc.category}, "
                          f"{h['similarity']} {inc.score:.2f})[/]")
            console.print(f"   {inc.source}")
            if fix := resolution_in(inc, _lg(answer)):
                console.print(f"   [dim]{h['fix']}:[/] {escape(fix)}")
    if answer.citations:
        console.print(f"\n[bold]{h['sources']}[/]")
        for c in answer.citations:
            console.print(
                f" {escape('[' + c.card + ']')} "
                f"{escape(c.title.get(_lg(answer)) or c.title.get('en') or c.title.get('zh', ''))}"
                + ("" if c.verified else f" [dim]{h['unverified']}[/]")
            )
            for url in c.sources:
                console.print(f"    {url}")
    if answer.deciding is not None:
        q = answer.deciding
        console.print(f"\n[bold]{h['decide']}[/]: "
                      + escape(q.text.get(_lg(answer)) or q.text.get("en", "")))
        console.print(f"  {h['answer_with']}: "
                      + " | ".join(f"--fact {q.id}={a}" for a in q.answers))
    for note in answer.notes:
        console.print(f"[yellow]{h['note']}:[/] {escape(note)}")


def answer_renderable(answer: Answer) -> Group:
    """For callers that want a renderable rather than printing."""
    return Group(Text(answer.summary))
