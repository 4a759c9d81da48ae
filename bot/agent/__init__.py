"""The optional LLM agent: tool calling, grounded and validated answers, redaction.

`respond(question, attachments=(), thread_id=None, settings=None, confirm_probe=None)`
is the entry point for the Slack app and `ncclbot ask --llm`. Importing this package
is cheap: LangChain is imported only when `respond` runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.config import Settings


def respond(question: str, attachments: Sequence[str | Path] = (), thread_id: str | None = None,
            settings: Settings | None = None, confirm_probe: Any = None,
            **kwargs: Any) -> dict[str, Any]:
    """The answer dict (bot.answer's contract plus "explanation" and "notes").

    Without a configured provider, or when the LLM fails, times out or cannot ground its
    answer: the deterministic answer of `bot.ask.answer_question`, with a note saying why.
    `confirm_probe(proposal) -> bool` is asked before any proposed probe runs.
    Keyword-only extras: lang, model (a chat model), store (ConversationStore), nodes
    (NodeBackend), on_request (sees every redacted message list sent to the model).
    """
    from bot.config import load_settings

    settings = settings or load_settings()
    if settings.llm_provider is None and kwargs.get("model") is None:
        return _no_llm(question, attachments, settings, kwargs.get("lang", "both"))
    from bot.agent.agent import respond as run

    return run(question, attachments, thread_id, settings, confirm_probe, **kwargs)


def _no_llm(question: str, attachments: Sequence[str | Path], settings: Settings,
            lang: str) -> dict[str, Any]:
    """No provider: the deterministic answer, without importing LangChain."""
    from bot.agent.backends import deterministic_answer

    answer = deterministic_answer(question, [str(p) for p in attachments], lang, settings)
    answer.setdefault("notes", []).append(
        "LLM unavailable (no provider configured: set NCCLBOT_LLM_PROVIDER); "
        "this is the deterministic answer.")
    answer.setdefault("explanation", "")
    answer["llm"] = {"used": False}
    return answer
