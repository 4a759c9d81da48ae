"""The bridge to the troubleshooting service: the agent, `ask`, or plain log analysis.

Log analysis is separate from answering: `Conversation` analyzes a thread's logs once per
set of logs (`AnalysisCache`, keyed by their fingerprints) and every answer in the thread,
follow-ups included, is built on that analysis. The answerer picks the best backend at
call time: `bot.agent.respond` when an LLM is configured, else the question through
`bot.ask` over the cached analysis, else the analysis alone. It never raises: any failure
becomes an answer that says what went wrong.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.config import Settings
from bot.errors import NcclbotError

if TYPE_CHECKING:
    from bot.diagnosis.engine import Diagnosis
    from bot.logs.model import LogReport

log = logging.getLogger(__name__)
#: Analyses are CPU-bound: at most one per core runs at a time, the rest wait their turn
#: (the scanner itself is thread-safe: one Hyperscan scratch per thread).
ANALYSIS_SLOTS = threading.BoundedSemaphore(max(2, os.cpu_count() or 2))

#: (report, diagnosis) of a set of logs, as `bot.service.analyze_sources` returns them.
Analysis = tuple["LogReport", "Diagnosis"]
Analyzer = Callable[[Sequence[str]], Analysis]


def _no_analysis() -> Analysis | None:
    return None


@dataclass
class Request:
    """One question in a thread. `analysis()` gives the analysis of `paths` (None without
    logs), made on first call and cached per set of logs; backends that read the logs
    themselves (the agent) never call it."""

    question: str
    paths: list[str] = field(default_factory=list)
    thread_id: str | None = None
    analysis: Callable[[], Analysis | None] = _no_analysis


Answerer = Callable[[Request], dict[str, Any]]

NO_LOG = {
    "en": "Attach the crash log (.log .txt .gz .zip) of the failing job, ideally every rank's, "
          "run with NCCL_DEBUG=INFO, and I will find the root cause.",
    "zh": "请附上失败作业的崩溃日志（.log .txt .gz .zip），最好包含所有 rank，"
          "并设置 NCCL_DEBUG=INFO。",
}


def _optional(module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return None
        raise
    except AttributeError:
        return None


def _empty(verdict: str, summary: str, text: str) -> dict[str, Any]:
    return {"verdict": verdict, "summary": summary, "text": text,
            "diagnosis": {"root_causes": [], "suspects": []}, "remediation": {},
            "citations": [], "probes": []}


def error_answer(exc: NcclbotError) -> dict[str, Any]:
    """An expected failure as an answer (the message says what to do next)."""
    return _empty("error", "I could not analyze that.",
                  exc.message + (f"\n{exc.hint}" if exc.hint else ""))


def failure_answer(exc: BaseException) -> dict[str, Any]:
    """An unexpected failure (a missing optional package, a bug) as an answer."""
    return _empty("error", "I could not answer that.",
                  f"The answering backend failed ({type(exc).__name__}: {str(exc)[:300]}). "
                  "The details are in the bot's log. Try again, or run `ncclbot analyze` "
                  "on the log.")


def question_aware(settings: Settings) -> bool:
    """Whether answers depend on the question (agent or ask), not only on the logs."""
    if settings.llm_provider and _optional("bot.agent", "respond") is not None:
        return True
    return _optional("bot.ask", "answer_question") is not None


def make_analyzer(settings: Settings) -> Analyzer:
    """The default analyzer: stream the logs through `bot.service.analyze_sources`."""

    def analyze(paths: Sequence[str]) -> Analysis:
        from bot.logs.sources import expand_inputs
        from bot.service import analyze_sources

        with ANALYSIS_SLOTS:
            return analyze_sources(expand_inputs(list(paths)), settings)

    return analyze


class AnalysisCache:
    """Analyses by set of logs (the key of their fingerprints), least recently used dropped.

    A follow-up question in a thread without new logs has the same key, so its answer is
    built on the analysis already made. Logs are content-addressed, so one key is one
    content whatever the thread.
    """

    def __init__(self, analyze: Analyzer, size: int = 64) -> None:
        self.analyze = analyze
        self.size = size
        self._items: OrderedDict[str, Analysis] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Analysis | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def analysis(self, key: str, paths: Sequence[str]) -> Analysis:
        found = self.get(key)
        if found is not None:
            return found
        made = self.analyze(paths)
        with self._lock:
            self._items[key] = made
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return made


def make_answerer(settings: Settings, respond: Callable[..., dict[str, Any]] | None = None,
                  agent_store: Any = None) -> Answerer:
    """The default answerer for this deployment; `respond` replaces `bot.agent.respond`.
    With an LLM configured, the agent keeps its per-thread state (attachments, cards seen,
    placeholders, turns) in the bot's SQLite file unless `agent_store` says otherwise."""
    if agent_store is None and settings.llm_provider:
        from bot.agent.state import SqliteConversationStore

        agent_store = SqliteConversationStore(settings.state_db)

    def answer(req: Request) -> dict[str, Any]:
        try:
            return _answer(settings, req, respond, agent_store)
        except NcclbotError as exc:
            return error_answer(exc)
        except Exception as exc:
            log.exception("the answering backend failed")
            return failure_answer(exc)

    return answer


def _answer(settings: Settings, req: Request, respond: Callable[..., dict[str, Any]] | None,
            agent_store: Any) -> dict[str, Any]:
    if settings.llm_provider:
        respond = respond or _optional("bot.agent", "respond")
        if respond is not None:
            extra = {"store": agent_store} if agent_store is not None else {}
            return respond(req.question, attachments=tuple(req.paths), thread_id=req.thread_id,
                           settings=settings, **extra)
    analysis = req.analysis()
    if req.question.strip() and _optional("bot.ask", "compose") is not None:
        return ask_with(req.question, analysis, settings)
    if analysis is not None:
        return analysis_answer(analysis)
    return _empty("no_evidence", "No log to analyze yet.", NO_LOG["en"] + "\n" + NO_LOG["zh"])


def ask_with(question: str, analysis: Analysis | None, settings: Settings) -> dict[str, Any]:
    """`bot.ask.answer_question` over an analysis already made (not re-reading the logs)."""
    from bot.ask import answer_question

    return answer_question(question, lang="both", settings=settings, analysis=analysis)


def analysis_answer(analysis: Analysis) -> dict[str, Any]:
    """The answer from the logs alone (no question, no retrieval)."""
    from bot.service import answer_from_analysis, bundled_cards

    report, diagnosis = analysis
    return answer_from_analysis(report, diagnosis, bundled_cards(), "both", brief=True)


def warm(settings: Settings) -> float:
    """Open (building it if needed) the retrieval index and compile the log scanner, so the
    first question after a start does not pay for it. Returns the seconds it took."""
    import time

    t0 = time.monotonic()
    from bot.logs.analyze import analyzer_for
    from bot.service import bundled_cards

    cards = list(bundled_cards())
    analyzer_for(cards, settings.cache_dir)
    if question_aware(settings):
        from bot.retrieval.search import get_retriever

        get_retriever(settings, cards, progress=False).search("NCCL watchdog timeout", 1)
    return time.monotonic() - t0
