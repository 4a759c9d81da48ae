"""Rendering an answer for a terminal with rich (pure: an `Answer` in, renderables out)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bot.answer import CERTAINTY_WORDS
from bot.contract import Answer

_LANG_TITLE = {"en": "Remediation", "zh": "处理步骤"}
_VERIFY_TITLE = {"en": "Verify", "zh": "验证"}
#: Section headings: English, or Chinese when only Chinese was asked for.
_HEADINGS = {
    "en": {"ranks": "Ranks", "causes": "Root causes[/] (best first)", "suspects": "Suspects",
           "probes": "Suggested node diagnostics:", "seen": "Seen before[/] (similar past "
           "incidents and what fixed them)", "sources": "Sources", "explanation": "Explanation"},
    "zh": {"ranks": "各 rank 情况", "causes": "可能的根因[/]（按可能性排序）",
           "suspects": "可疑 rank", "probes": "建议的节点诊断：",
           "seen": "以前见过[/]（相似的历史事件及其解决办法）", "sources": "来源",
           "explanation": "说明"},
}




def headline(answer: Answer) -> str:
    """The verdict and the suspect, in the answer's language (English unless only Chinese
    was asked for)."""
    if answer.lang != "zh":
        return answer.summary
    if not answer.root_causes:
        return "日志中没有发现故障证据。" if answer.verdict == "no_evidence" else answer.summary
    rc = answer.root_causes[0]
    word = "不确定"
    if answer.verdict == "diagnosed":
        word = CERTAINTY_WORDS["zh"].get(rc.certainty or "weak", word)
    title = rc.title.get("zh") or rc.category_name.get("zh") or rc.category
    text = f"{word}：{rc.category}（{rc.confidence:.0%}）- {title}。"
    if answer.diagnosis.suspects:
        s = answer.diagnosis.suspects[0]
        who = " ".join(x for x in (s.host or "", f"rank {s.rank}" if s.rank is not None else "")
                       if x)
        text += f" 可疑：{who}。"
    return text


def render_answer(answer: Answer, console: Console) -> None:
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
            console.print(
                f" {i}. [bold]{rc.category}[/] {rc.certainty or ''} "
                f"{rc.confidence:.0%}  {escape(title)}"
                + (f"  [dim]card: {rc.card}[/]" if rc.card else "")
            )
            for why in rc.why[:3]:
                console.print(f"    [dim]- {escape(why)}[/]")
            for ev in rc.evidence[:3]:
                text = ev.text if len(ev.text) < 200 else ev.text[:200] + "..."
                console.print(f"    [green]{escape(ev.file)}:{ev.line}[/]  {escape(text)}")
    if diag.suspects:
        table = Table(title=h["suspects"], show_lines=False, expand=False)
        for col in ("rank", "host", "reason"):
            table.add_column(col)
        for s in diag.suspects[:10]:
            table.add_row(str(s.rank) if s.rank is not None else "-", s.host or "-",
                          escape(s.reason))
        console.print(table)
    for lang, steps in answer.remediation.items():
        if steps:
            console.print(f"\n[bold]{_LANG_TITLE[lang]}[/] ({lang})")
            for i, step in enumerate(steps, start=1):
                console.print(f" {i}. {escape(step)}")
    for lang, steps in answer.verify.items():
        if steps:
            console.print(f"[bold]{_VERIFY_TITLE[lang]}[/] ({lang})")
            for step in steps:
                console.print(f" - {escape(step)}")
    for lang, steps in (answer.next_steps or {}).items():
        console.print(f"\n[bold]{'What would help' if lang == 'en' else '需要补充的信息'}[/]")
        for step in steps:
            console.print(f" - {escape(step)}")
    if answer.probes:
        console.print(
            f"\n[bold]{h['probes']}[/] "
            + ", ".join(f"ncclbot node {p}" for p in answer.probes)
        )
    for p in answer.suggested_probes:  # proposed by the LLM agent
        console.print(f"[bold]Probe[/] {escape(p.preset)} on {escape(p.node)}: "
                      f"{escape(p.status)}" + (f" - {escape(p.reason)}" if p.reason else ""))
    if answer.similar_incidents:
        console.print(f"\n[bold]{h['seen']}")
        for inc in answer.similar_incidents:
            console.print(f" - {escape(inc.title)} [dim]({inc.category}, "
                          f"similarity {inc.score:.2f})[/]")
            console.print(f"   {inc.source}")
            console.print(f"   [dim]fix:[/] {escape(inc.resolution)}")
    if answer.citations:
        console.print(f"\n[bold]{h['sources']}[/]")
        for c in answer.citations:
            console.print(
                f" {escape('[' + c.card + ']')} "
                f"{escape(c.title.get('en') or c.title.get('zh', ''))}"
                + ("" if c.verified else " [dim](not yet re-checked against its sources)[/]")
            )
            for url in c.sources:
                console.print(f"    {url}")
    for note in answer.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def answer_renderable(answer: Answer) -> Group:
    """For callers that want a renderable rather than printing."""
    return Group(Text(answer.summary))
