"""The optional LLM agent: tool calling, grounded and validated answers, redaction.

`respond(question, attachments=(), thread_id=None, settings=None, confirm_probe=None)`
is the entry point for the Slack app and `ncclbot ask`. Importing this package is
cheap: LangChain is imported only when `respond` runs with a provider configured.
Conversation state: `bot.threads.InMemoryThreadStore` (the default), `SqliteThreadStore(path)`
or `open_thread_store(settings)` (SQLite or PostgreSQL), passed as `store=`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.agent.backends import LazyAnalysis
    from bot.agent.models import ConfirmProbe
    from bot.config import Settings
    from bot.contract import Answer

#: Top-level modules of the `llm` extra; without them the agent cannot run.
LLM_EXTRA = frozenset({"langchain", "langchain_core", "langgraph", "langchain_openai",
                       "langchain_ollama"})


def respond(question: str, attachments: Sequence[str | Path] = (), thread_id: str | None = None,
            settings: Settings | None = None, confirm_probe: ConfirmProbe | None = None,
            **kwargs: Any) -> Answer:
    """The `Answer` (with "explanation", "notes" and "llm").

    Without a configured provider, without the `llm` extra, or when the LLM fails, times
    out or cannot ground its answer: the deterministic answer of `bot.ask.answer_question`,
    with a note saying why. `confirm_probe(proposal) -> bool` is asked before any proposed
    probe runs. Keyword-only extras: lang (en, zh, both, auto), model (a chat model),
    store (ThreadStore), nodes (NodeBackend), on_request (sees every redacted
    message list sent to the model), analyze (the log analysis, for tests), analysis (the
    attachments' analysis already made: the deterministic answer reuses it).
    """
    from bot.config import load_settings
    from bot.troubleshooter import llm_configured

    settings = settings or load_settings()
    lang = kwargs.get("lang", "both")
    if not llm_configured(settings) and kwargs.get("model") is None:
        from bot.agent.backends import DETERMINISTIC, NO_PROVIDER

        return _deterministic(question, attachments, settings, lang,
                              f"{NO_PROVIDER}; {DETERMINISTIC}", kwargs.get("analysis"))
    try:
        from bot.agent.agent import respond as run
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in LLM_EXTRA:
            raise
        from bot.agent.backends import DETERMINISTIC

        return _deterministic(question, attachments, settings, lang,
                              f"LLM unavailable (the `llm` extra is not installed: no module "
                              f"{exc.name!r}; pip install 'ncclbot[llm]'); {DETERMINISTIC}",
                              kwargs.get("analysis"))
    return run(question, attachments, thread_id, settings, confirm_probe, **kwargs)


def _deterministic(question: str, attachments: Sequence[str | Path], settings: Settings,
                   lang: str, note: str, analysis: LazyAnalysis | None = None) -> Answer:
    """No usable LLM: the deterministic answer, without importing LangChain."""
    from bot.agent.backends import fallback_answer

    return fallback_answer(question, [str(p) for p in attachments], lang, settings, [note],
                           analysis)
