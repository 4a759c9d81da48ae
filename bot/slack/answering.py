"""The bridge to the troubleshooting service: the agent, `ask`, or plain log analysis.

Picks the best available backend at call time: `bot.agent.respond` when an LLM is
configured, else `bot.ask.answer_question`, else `bot.service.analyze_paths` for logs.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from bot.config import Settings
from bot.errors import NcclbotError

log = logging.getLogger(__name__)
#: Analyses are CPU-bound: at most one per core runs at a time, the rest wait their turn
#: (the scanner itself is thread-safe: one Hyperscan scratch per thread).
ANALYSIS_SLOTS = threading.BoundedSemaphore(max(2, os.cpu_count() or 2))

Answerer = Callable[[str, Sequence[str], str | None], dict[str, Any]]

NO_LOG = {
    "en": "Attach the crash log (.log .txt .gz .zip) of the failing job, ideally every rank's, "
          "run with NCCL_DEBUG=INFO, and I will find the root cause.",
    "zh": "请附上失败作业的崩溃日志（.log .txt .gz .zip），最好包含所有 rank，"
          "并设置 NCCL_DEBUG=INFO。",
}


def _optional(module: str, name: str) -> Callable[..., Any] | None:
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return None
        raise
    except AttributeError:
        return None


def error_answer(exc: NcclbotError) -> dict[str, Any]:
    """An expected failure as an answer (the message says what to do next)."""
    text = exc.message + (f"\n{exc.hint}" if exc.hint else "")
    return {"verdict": "error", "summary": "I could not analyze that.", "text": text,
            "diagnosis": {"root_causes": [], "suspects": []}, "remediation": {},
            "citations": [], "probes": []}


def question_aware(settings: Settings) -> bool:
    """Whether answers depend on the question (agent or ask), not only on the logs."""
    if settings.llm_provider and _optional("bot.agent", "respond") is not None:
        return True
    return _optional("bot.ask", "answer_question") is not None


def make_answerer(settings: Settings) -> Answerer:
    """The default answerer for this deployment."""

    def answer(question: str, paths: Sequence[str], thread_id: str | None) -> dict[str, Any]:
        try:
            with ANALYSIS_SLOTS:
                return _answer(settings, question, list(paths), thread_id)
        except NcclbotError as exc:
            return error_answer(exc)

    return answer


def _answer(settings: Settings, question: str, paths: list[str], thread_id: str | None
            ) -> dict[str, Any]:
    respond = _optional("bot.agent", "respond") if settings.llm_provider else None
    if respond is not None:
        return respond(question, attachments=tuple(paths), thread_id=thread_id,
                       settings=settings)
    ask = _optional("bot.ask", "answer_question")
    if ask is not None and question.strip():
        return ask(question, log_paths=tuple(paths), lang="both", settings=settings)
    if paths:
        from bot.service import analyze_paths

        return analyze_paths(paths, settings, "both")
    return {"verdict": "no_evidence", "summary": "No log to analyze yet.",
            "text": NO_LOG["en"] + "\n" + NO_LOG["zh"],
            "diagnosis": {"root_causes": [], "suspects": []}, "remediation": {},
            "citations": [], "probes": []}
