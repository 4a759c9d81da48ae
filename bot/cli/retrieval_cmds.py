"""`ncclbot ask` and `ncclbot index` (retrieval and LLM imports happen inside the commands).

`ask` is one `Troubleshooter.answer`: through the LLM agent when the settings configure
one (falling back as the agent does), otherwise deterministic (LangChain never imported).
(No `from __future__ import annotations`: typer reads the command's annotations at run time.)
"""

import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO

import typer

if TYPE_CHECKING:
    from bot.answering.contract import Answer
    from bot.config import Settings


def register(app: typer.Typer, serve_app: typer.Typer) -> None:
    from bot.cli.main import (
        ConfigOpt,
        DetailsOpt,
        FactOpt,
        JsonOpt,
        answer_lang,
        console,
        emit,
        facts_from,
        settings_from,
    )

    @app.command()
    def ask(
        question: Annotated[str, typer.Argument(help="The question, in English or Chinese.")],
        log: Annotated[list[str] | None, typer.Option(
            "--log", help="A crash log (.log .txt .gz .zip or -); repeat for several.")] = None,
        lang: Annotated[str | None, typer.Option(
            "--lang", help="en, zh, both, or auto (the question's language); default: your "
            "locale (zh_* -> zh), both with --json.")] = None,
        as_json: JsonOpt = False,
        details: DetailsOpt = False,
        fact: FactOpt = None,
        config: ConfigOpt = None,
    ) -> None:
        """Answer a question from the incident cards (and the logs, when given); through
        the LLM agent when NCCLBOT_LLM_PROVIDER is set."""
        chosen = answer_lang(lang, as_json, ("en", "zh", "both", "auto"))
        if not question.strip():
            raise typer.BadParameter("the question is empty")
        facts = facts_from(fact)
        settings = settings_from(config)
        answer = agent_answer(question, log or (), chosen, settings,
                              interactive=not as_json and sys.stdin.isatty(),
                              why_not=("--json" if as_json else "stdin is not a terminal"),
                              facts=facts)
        emit(answer, as_json, details)

    @app.command()
    def index(
        rebuild: Annotated[bool, typer.Option("--rebuild", help="Re-embed every card.")] = False,
        config: ConfigOpt = None,
    ) -> None:
        """Build or refresh the retrieval index (done automatically on first use)."""
        from bot.answering.knowledge import bundled_cards
        from bot.retrieval.index import ensure_index

        settings = settings_from(config)
        cards = list(bundled_cards())
        result = ensure_index(settings, cards, rebuild=rebuild)
        where = (f"chroma server {settings.chroma_host}:{settings.chroma_port}"
                 if settings.chroma_host else str(settings.index_path))
        state = "built" if result.built else "up to date"
        console().print(f"index {state}: {len(cards)} cards, {result.embedded} chunks embedded, "
                        f"model {settings.embedding_model}, {where} (hash {result.hash[:12]})")


def agent_answer(question: str, logs: Sequence[str], lang: str, settings: "Settings", *,
                 interactive: bool, why_not: str = "stdin is not a terminal",
                 facts: dict[str, str] | None = None, **extra: Any) -> "Answer":
    """The Troubleshooter's answer; each probe the agent proposes is put to the user
    (typer.confirm) when `interactive`, and otherwise declined, with a note saying so
    (`why_not`). `extra` goes to `bot.agent.respond` (e.g. `nodes=`). Bad input raises
    (the CLI prints it in one line)."""
    from bot.agent.models import ProbeProposal
    from bot.answering.troubleshooter import Question, Troubleshooter

    def confirm(proposal: ProbeProposal) -> bool | str:
        if not interactive:
            return (f"confirming it needs an interactive terminal ({why_not}); run `ncclbot "
                    f"ask` in a terminal, or `ncclbot node probe --node {proposal.node}` "
                    "yourself")
        return typer.confirm(f"Run the NCCL probe {proposal.preset!r} on node "
                             f"{proposal.node} now ({proposal.params})?",
                             default=False, err=True)

    with spooled_stdin(logs, settings.max_input_bytes) as paths:
        asked = Question(question, tuple(paths), lang=lang,
                         facts=tuple(sorted((facts or {}).items())))
        return Troubleshooter(settings).answer(asked, confirm_probe=confirm, strict=True,
                                               **extra)


@contextmanager
def spooled_stdin(logs: Sequence[str], limit: int) -> Iterator[list[str]]:
    """The log paths, with `-` (stdin) copied to a temporary file first: the agent reads a
    log more than once (for names to hide, for analysis, for the fallback answer)."""
    if "-" not in logs:
        yield list(logs)
        return
    with tempfile.TemporaryDirectory(prefix="ncclbot-stdin-") as tmp:
        spooled = Path(tmp) / "stdin.log"
        with spooled.open("wb") as fh:
            _copy_at_most(sys.stdin.buffer, fh, limit + 1)
        yield [str(spooled) if p == "-" else p for p in logs]


def _copy_at_most(src: BinaryIO, dst: BinaryIO, limit: int) -> None:
    left = limit
    while left > 0:
        chunk = src.read(min(left, 1 << 20))
        if not chunk:
            return
        dst.write(chunk)
        left -= len(chunk)
