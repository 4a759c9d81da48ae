"""The answering entry points, returning the answer's JSON form (`Answer.model_dump`): the
shape `--json` prints and users' scripts read, which is what these tests assert on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.answering.ask import answer_question as _answer_question
from bot.answering.troubleshooter import Question, Troubleshooter
from bot.answering.troubleshooter import analyze_paths as _analyze_paths
from bot.cli.retrieval_cmds import agent_answer as _agent_answer
from bot.config import Settings, load_settings
from bot.state.threads import InMemoryThreadStore

#: the thread memory of `respond` calls that name none (one per test process, as the
#: agent's own default was)
SHARED_STORE = InMemoryThreadStore()


def respond(question: str, attachments: Sequence[str | Path] = (),
            thread_id: str | None = None, settings: Settings | None = None,
            confirm_probe: Any = None, *, lang: str = "both", model: Any = None,
            store: Any = None, **extra: Any) -> dict[str, Any]:
    """One question through the Troubleshooter (the LLM agent when the settings or `model`
    name one; its fallback otherwise), as `ncclbot ask` and Slack ask it."""
    t = Troubleshooter(settings or load_settings(), chat_model=model,
                       agent_store=store if store is not None else SHARED_STORE)
    q = Question(question, tuple(str(p) for p in attachments), thread_id, lang)
    return t.answer(q, confirm_probe=confirm_probe, **extra).model_dump(mode="json")


def answer_question(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return _answer_question(*args, **kwargs).model_dump(mode="json")


def analyze_paths(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return _analyze_paths(*args, **kwargs).model_dump(mode="json")


def agent_answer(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return _agent_answer(*args, **kwargs).model_dump(mode="json")
