"""`ncclbot ask` and `ncclbot index` (retrieval imports happen inside the commands)."""

from typing import Annotated

import typer


def register(app: typer.Typer, serve_app: typer.Typer) -> None:
    from bot.cli.main import ConfigOpt, JsonOpt, console, emit, settings_from

    @app.command()
    def ask(
        question: Annotated[str, typer.Argument(help="The question, in English or Chinese.")],
        log: Annotated[list[str] | None, typer.Option(
            "--log", help="A crash log (.log .txt .gz .zip or -); repeat for several.")] = None,
        lang: Annotated[str, typer.Option(
            "--lang", help="en, zh, both, or auto (the question's language).")] = "both",
        as_json: JsonOpt = False,
        config: ConfigOpt = None,
    ) -> None:
        """Answer a question from the incident cards (and the logs, when given)."""
        if lang not in ("en", "zh", "both", "auto"):
            raise typer.BadParameter("--lang must be one of en, zh, both, auto")
        if not question.strip():
            raise typer.BadParameter("the question is empty")
        from bot.ask import answer_question

        emit(answer_question(question, tuple(log or ()), lang, settings_from(config)), as_json)

    @app.command()
    def index(
        rebuild: Annotated[bool, typer.Option("--rebuild", help="Re-embed every card.")] = False,
        config: ConfigOpt = None,
    ) -> None:
        """Build or refresh the retrieval index (done automatically on first use)."""
        from bot.retrieval.index import ensure_index
        from bot.service import bundled_cards

        settings = settings_from(config)
        cards = list(bundled_cards())
        result = ensure_index(settings, cards, rebuild=rebuild)
        where = (f"chroma server {settings.chroma_host}:{settings.chroma_port}"
                 if settings.chroma_host else str(settings.index_path))
        state = "built" if result.built else "up to date"
        console().print(f"index {state}: {len(cards)} cards, {result.embedded} chunks embedded, "
                        f"model {settings.embedding_model}, {where} (hash {result.hash[:12]})")
