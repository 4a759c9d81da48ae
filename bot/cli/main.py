"""`ncclbot`: the command line. Heavy imports stay inside the commands that need them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from bot.errors import NcclbotError

app = typer.Typer(
    name="ncclbot",
    help="Troubleshoot NCCL and distributed-training failures from crash logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
knowledge_app = typer.Typer(help="Validate and browse the incident cards.", no_args_is_help=True)
app.add_typer(knowledge_app, name="knowledge")
serve_app = typer.Typer(
    help="Run a service: the Slack app or the node agent.", no_args_is_help=True
)
app.add_typer(serve_app, name="serve")

#: Modules that add commands; each has `register(app, serve_app)` and keeps its
#: module-level imports light (no torch, chromadb, langchain or slack at import).
REGISTRARS = (
    "bot.cli.retrieval_cmds",  # ask, index
    "bot.cli.node_cmds",  # node topo|env|probe|xid [--node], nodes
    "bot.cli.agent_cmds",  # serve agent
    "bot.cli.slack_cmds",  # serve slack, feedback report
)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML settings file (or NCCLBOT_CONFIG).")
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the JSON contract instead of a report.")
]
LangOpt = Annotated[str, typer.Option("--lang", help="en, zh or both.")]


def settings_from(config: Path | None):
    from bot.config import load_settings

    return load_settings(config)


def console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def emit(answer: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(answer, ensure_ascii=False, indent=2) + "\n")
    else:
        from bot.render.terminal import render_answer

        render_answer(answer, console())


def _check_lang(lang: str, allowed: tuple[str, ...] = ("en", "zh", "both")) -> str:
    if lang not in allowed:
        raise typer.BadParameter(f"--lang must be one of {', '.join(allowed)}")
    return lang


@app.command()
def analyze(
    files: Annotated[
        list[str], typer.Argument(help="Log files (.log .txt .gz .zip) or - for stdin.")
    ],
    as_json: JsonOpt = False,
    lang: LangOpt = "both",
    config: ConfigOpt = None,
) -> None:
    """Analyze crash logs and print the most likely root causes."""
    from bot.service import analyze_paths

    answer = analyze_paths(files, settings_from(config), _check_lang(lang))
    emit(answer, as_json)


@knowledge_app.command("check")
def knowledge_check(
    fixtures: Annotated[
        Path | None,
        typer.Option(help="Fixture cases folder (default: tests/fixtures/cases if present)."),
    ] = None,
) -> None:
    """Validate every card; exit non-zero on any defect, naming file and field."""
    from bot.knowledge.check import check_all

    problems, count = check_all(fixtures)
    out = console()
    for p in problems:
        out.print(f"[red]{p}[/]")
    if problems:
        out.print(f"[red]{len(problems)} defect(s) in {count} card(s)[/]")
        raise typer.Exit(1)
    out.print(f"[green]{count} cards OK[/]")


@knowledge_app.command("list")
def knowledge_list(
    category: Annotated[str | None, typer.Option(help="Only this category id.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the cards."""
    from bot.service import bundled_cards

    cards = [c for c in bundled_cards() if category is None or c.category == category]
    if as_json:
        rows = [
            {
                "id": c.id,
                "category": c.category,
                "title": c.title.model_dump(),
                "sources": c.source_urls,
                "remediation": c.remediation.model_dump(),
            }
            for c in cards
        ]
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
        return
    from rich.table import Table

    table = Table("id", "category", "title")
    for c in cards:
        table.add_row(c.id, c.category, c.title.en)
    console().print(table)


@knowledge_app.command("show")
def knowledge_show(card_id: str, lang: LangOpt = "both") -> None:
    """Show one card."""
    from bot.knowledge.show import render_card
    from bot.service import bundled_cards

    render_card(card_id, list(bundled_cards()), _check_lang(lang), console())


def _register_all() -> None:
    import importlib

    for name in REGISTRARS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(app, serve_app)


_register_all()


def main() -> None:
    try:
        app()
    except NcclbotError as exc:
        from rich.console import Console

        err = Console(stderr=True, highlight=False, soft_wrap=True)
        err.print(f"[red]error:[/] {exc.message}")
        if exc.hint:
            err.print(f"[yellow]hint:[/] {exc.hint}")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
