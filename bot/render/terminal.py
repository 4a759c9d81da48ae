"""Rendering an answer for a terminal with rich (pure: an `Answer` in, renderables out)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bot.contract import Answer

_LANG_TITLE = {"en": "Remediation", "zh": "处理步骤"}
_VERIFY_TITLE = {"en": "Verify", "zh": "验证"}


def render_answer(answer: Answer, console: Console) -> None:
    console.print(Panel(Text(answer.summary, style="bold"), title="ncclbot", expand=False))
    if answer.explanation:  # the LLM agent's plain-language account
        console.print("[bold]Explanation[/]")
        console.print(Text(answer.explanation))
    if answer.text:
        console.print(Text(answer.text))
    diag = answer.diagnosis
    for line in diag.ranks:
        console.print(f"  [cyan]ranks[/] {escape(line)}")
    if diag.root_causes:
        console.print()
        console.print("[bold]Root causes[/] (best first)")
        for i, rc in enumerate(diag.root_causes, start=1):
            title = rc.title.get("en") or rc.category_name.get("en", "")
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
        table = Table(title="Suspects", show_lines=False, expand=False)
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
            "\n[bold]Suggested node diagnostics:[/] "
            + ", ".join(f"ncclbot node {p}" for p in answer.probes)
        )
    for p in answer.suggested_probes:  # proposed by the LLM agent
        console.print(f"[bold]Probe[/] {escape(p.preset)} on {escape(p.node)}: "
                      f"{escape(p.status)}" + (f" - {escape(p.reason)}" if p.reason else ""))
    if answer.similar_incidents:
        console.print("\n[bold]Seen before[/] (similar past incidents and what fixed them)")
        for inc in answer.similar_incidents:
            console.print(f" - {escape(inc.title)} [dim]({inc.category}, "
                          f"similarity {inc.score:.2f})[/]")
            console.print(f"   {inc.source}")
            console.print(f"   [dim]fix:[/] {escape(inc.resolution)}")
    if answer.citations:
        console.print("\n[bold]Sources[/]")
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
