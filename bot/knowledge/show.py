"""`ncclbot knowledge show ID`: one card, in one or both languages."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from bot.errors import KnowledgeError
from bot.knowledge.cards import Basis, Card


def find_card(card_id: str, cards: Sequence[Card]) -> Card:
    for c in cards:
        if c.id == card_id:
            return c
    close = difflib.get_close_matches(card_id, [c.id for c in cards], n=3)
    raise KnowledgeError(
        f"no card '{card_id}'",
        hint=f"Did you mean: {', '.join(close)}?"
        if close
        else "List the cards with `ncclbot knowledge list`.",
    )


def render_card(card_id: str, cards: Sequence[Card], lang: str, out: Console) -> None:
    card = find_card(card_id, cards)
    langs = ("en", "zh") if lang == "both" else (lang,)
    out.print(
        f"[bold]{card.id}[/]  [cyan]{card.category}[/]"
        + (f" (also: {', '.join(card.also)})" if card.also else "")
    )
    for lg in langs:
        out.print(f"\n[bold]{escape(getattr(card.title, lg))}[/]")
        out.print("[bold]Symptoms[/]" if lg == "en" else "[bold]现象[/]")
        for s in getattr(card.symptoms, lg):
            out.print(f" - {escape(s)}")
        out.print("[bold]Root cause[/]" if lg == "en" else "[bold]根因[/]")
        out.print(escape(getattr(card.root_cause, lg)))
        _basis(out, card.root_cause.basis, "   ")
        out.print("[bold]Remediation[/]" if lg == "en" else "[bold]处理步骤[/]")
        for i, step in enumerate(card.remediation, 1):
            out.print(f" {i}. {escape(getattr(step, lg))}")
            if step.cost:
                out.print(f"    [yellow]cost:[/] {escape(step.cost)}")
            _basis(out, step.basis, "    ")
        out.print("[bold]Verify[/]" if lg == "en" else "[bold]验证[/]")
        for step in card.verify:
            out.print(f" - {escape(getattr(step, lg))}")
            _basis(out, step.basis, "    ")
    if not card.verified:
        out.print("\n[yellow]Not yet re-checked against its sources: its claims quote none.[/]")
    if card.signatures:
        out.print("\n[bold]Signatures[/]")
        for sig in card.signatures:
            out.print(f" {sig.name} ({sig.weight}): {escape(sig.pattern)}")
    out.print("\n[bold]Sources[/]")
    for url in card.source_urls:
        out.print(f" {url}")
    out.print(f"[dim]reviewed {card.reviewed}; frameworks: {', '.join(card.frameworks)}[/]")


def _basis(out: Console, basis: Sequence[Basis], indent: str) -> None:
    for b in basis:
        out.print(f"{indent}[dim]\u201c{escape(b.quote)}\u201d ({b.source})[/]")
