"""The optional LLM agent: tool calling, grounded and validated answers, redaction.

`respond(question, attachments=(), thread_id=None, settings=None, confirm_probe=None)`
is the entry point for the Troubleshooter (`bot.answering.troubleshooter`), which alone decides
whether an LLM answers and builds the deterministic answer when the agent declines.
Importing this package is cheap: LangChain is imported only when `respond` runs.
Conversation state: `bot.state.threads.InMemoryThreadStore` (the default), `SqliteThreadStore(path)`
or `open_thread_store(settings)` (SQLite or PostgreSQL), passed as `store=`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.agent.backends import AgentDeclined

if TYPE_CHECKING:
    from bot.agent.models import ConfirmProbe
    from bot.answering.contract import Answer
    from bot.config import Settings

__all__ = ["LLM_EXTRA", "AgentDeclined", "respond"]

#: Top-level modules of the `llm` extra; without them the agent cannot run.
LLM_EXTRA = frozenset({"langchain", "langchain_core", "langgraph", "langchain_openai",
                       "langchain_ollama"})


def respond(question: str, attachments: Sequence[str | Path] = (), thread_id: str | None = None,
            settings: Settings | None = None, confirm_probe: ConfirmProbe | None = None,
            **kwargs: Any) -> Answer | AgentDeclined:
    """The agent's `Answer` (with "explanation", "notes" and "llm"), or `AgentDeclined`
    saying why it could not answer: no provider configured, the `llm` extra not installed,
    the LLM failing, too slow or unable to ground its answer. Whether to ask the agent at
    all is the Troubleshooter's decision, and so is the answer given instead.
    `confirm_probe(proposal) -> bool | str` is asked before any proposed probe runs (a
    string: declined, and why). Keyword-only extras: lang (en, zh, both, auto), model (a
    chat model), store (ThreadStore), nodes (NodeBackend), on_request (sees every redacted
    message list sent to the model), analyze (the log analysis, for tests), watch (LlmWatch).
    """
    from bot.config import load_settings

    settings = settings or load_settings()
    try:
        from bot.agent.agent import respond as run
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in LLM_EXTRA:
            raise
        from bot.agent.backends import DETERMINISTIC

        return AgentDeclined((f"LLM unavailable (the `llm` extra is not installed: no module "
                              f"{exc.name!r}; pip install 'ncclbot[llm]'); {DETERMINISTIC}",),
                             tuple(str(p) for p in attachments))
    return run(question, attachments, thread_id, settings, confirm_probe, **kwargs)
