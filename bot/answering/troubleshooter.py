"""The Troubleshooter: one object that answers a `Question` with an `Answer`.

Built once from the settings (and, optionally, a chat model); `ncclbot analyze`, `ask`,
`node hang`, Slack and MCP all call `Troubleshooter.answer`. It

- decides once, at construction, whether an LLM answers (`uses_llm`), and per answer
  whether it is tried now (`llm_available`: the circuit breaker);
- analyses each set of logs once (`AnalysisCache`, keyed by the logs' fingerprint);
- answers deterministically through one function, `deterministic`, whenever the LLM does
  not: not configured, skipped, too slow, or the agent declined (`AgentDeclined`);
- never raises from `answer`: an expected failure becomes `Answer.error`, anything else
  `Answer.failure` (logged).

`deterministic` by kind of input: hang samples are triangulated (`answer_hang`), a
question goes through `answer_question` (over the analysis), logs without a question
become the analysis answer (`answer_from_analysis`), and nothing at all asks for a log.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.agent.backends import AgentDeclined, LlmWatch
from bot.answering.contract import Answer, LlmUse, resolve_lang
from bot.answering.followup import FollowUp
from bot.config import Settings
from bot.errors import NcclbotError

if TYPE_CHECKING:
    from bot.diagnosis.engine import Diagnosis
    from bot.logs.model import LogReport
    from tools.hang.model import HangSample

log = logging.getLogger(__name__)

#: (report, diagnosis) of a set of logs, as `bot.answering.analysis.analyze_sources` returns them.
Analysis = tuple["LogReport", "Diagnosis"]
Analyzer = Callable[[Sequence[str]], Analysis]
#: `bot.agent.respond`'s signature (question, attachments, thread_id, settings, confirm, ...)
Respond = Callable[..., "Answer | AgentDeclined"]

#: Analyses are CPU-bound: at most one per core runs at a time, the rest wait their turn
#: (the scanner itself is thread-safe: one Hyperscan scratch per thread).
ANALYSIS_SLOTS = threading.BoundedSemaphore(max(2, os.cpu_count() or 2))

NO_LOG = {
    "en": "Attach the crash log (.log .txt .gz .zip) of the failing job, ideally every rank's, "
          "run with NCCL_DEBUG=INFO, and I will find the root cause.",
    "zh": "请附上失败作业的崩溃日志（.log .txt .gz .zip），最好包含所有 rank，"
          "并设置 NCCL_DEBUG=INFO。",
}


@dataclass(frozen=True)
class Question:
    """One question: its text (may be empty), the log files that go with it, the thread it
    belongs to (for the agent's memory), the answer's language (en, zh, both, auto) and,
    when the caller knows it, the logs' content fingerprint (`logs_key`)."""

    text: str
    logs: tuple[str, ...] = ()
    thread_id: str | None = None
    lang: str = "both"
    logs_key: str | None = None
    #: answered deciding questions (`container=yes`), evidence like any other
    facts: tuple[tuple[str, str], ...] = ()
    #: a live hang's samples (`ncclbot node hang`), the input instead of logs
    samples: tuple[HangSample, ...] = ()
    #: what the caller already has to say (samples that did not come back, ...): last
    notes: tuple[str, ...] = ()
    #: a log without failure is noted without listing what was looked for (Slack); the
    #: CLI's `analyze` lists it
    brief: bool = True


def deterministic(question: Question, analysis: Analysis | None, settings: Settings | None,
                  *, notes: Sequence[str] = (), llm: LlmUse | None = None) -> Answer:
    """The answer without an LLM, for every kind of input, built once: hang samples
    triangulated; a question over its logs' `analysis` (or none); the logs alone; or, with
    nothing at all, a request for the log. Its notes: the input's own (reading problems,
    the triangulation's), the question's, then `notes` (why the LLM did not answer)."""
    more = (*question.notes, *notes)
    lang = question.lang
    if question.samples:
        from bot.answering.analysis import answer_hang

        return answer_hang(question.samples, settings,
                           resolve_lang("", lang) if lang == "auto" else lang,
                           notes=more, llm=llm)
    if question.text.strip():
        from bot.answering.ask import answer_question

        return answer_question(question.text, lang=lang, settings=settings, analysis=analysis,
                               facts=dict(question.facts), notes=more, llm=llm)
    if analysis is not None:
        from bot.answering.analysis import answer_from_analysis
        from bot.answering.knowledge import bundled_cards

        report, diagnosis = analysis
        return answer_from_analysis(report, diagnosis, bundled_cards(),
                                    resolve_lang("", lang) if lang == "auto" else lang,
                                    brief=question.brief, facts=dict(question.facts),
                                    notes=more, llm=llm)
    return Answer.plain("no_evidence", "No log to analyze yet.",
                        NO_LOG["en"] + "\n" + NO_LOG["zh"], more, llm)


def analyze_paths(paths: Sequence[str], settings: Settings | None = None, lang: str = "both",
                  facts: Mapping[str, str] | None = None) -> Answer:
    """`ncclbot analyze`'s answer for scripts and benchmarks: the logs (or `-`, stdin)
    analysed, then `deterministic` (bad input raises, as the CLI's)."""
    from bot.answering.analysis import analyze_sources
    from bot.logs.sources import expand_inputs

    question = Question("", tuple(paths), lang=lang, brief=False,
                        facts=tuple(sorted((facts or {}).items())))
    return deterministic(question, analyze_sources(expand_inputs(list(paths)), settings),
                         settings)


def logs_fingerprint(paths: Sequence[str]) -> str:
    """A key for a set of log files: their names, sizes and modification times (callers that
    hold content hashes pass `Question.logs_key` instead)."""
    h = hashlib.sha256()
    for p in sorted(paths):
        try:
            st = Path(p).stat()
            h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{p}\0missing\n".encode())
    return h.hexdigest()[:32]


def make_analyzer(settings: Settings) -> Analyzer:
    """Stream the logs through `bot.answering.analysis.analyze_sources`, one analysis per core."""

    def analyze(paths: Sequence[str]) -> Analysis:
        from bot.answering.analysis import analyze_sources
        from bot.logs.sources import expand_inputs

        with ANALYSIS_SLOTS:
            return analyze_sources(expand_inputs(list(paths)), settings)

    return analyze


class AnalysisCache:
    """Analyses by set of logs (their fingerprint), least recently used dropped.

    A follow-up question in a thread without new logs has the same key, so its answer is
    built on the analysis already made.
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


class CircuitBreaker:
    """After `threshold` LLM outages in a row (unreachable, timed out, out of time), the LLM
    is skipped for `cooldown_s`: every answer is deterministic at once instead of waiting
    for the same timeout again. The first answer after the cool-down tries the LLM again."""

    def __init__(self, threshold: int = 3, cooldown_s: float = 120.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
        self.failures = 0
        self.open_until = 0.0
        self._lock = threading.Lock()

    def allows(self) -> bool:
        with self._lock:
            return self.clock() >= self.open_until

    def left_s(self) -> float:
        return max(0.0, self.open_until - self.clock())

    def record(self, outage: bool) -> None:
        with self._lock:
            if not outage:
                self.failures = 0
                return
            self.failures += 1
            if self.failures >= self.threshold:
                self.open_until = self.clock() + self.cooldown_s
                self.failures = 0


#: Notes of a fallback answer that mean the LLM was not reachable or too slow.
OUTAGE_NOTES = ("LLM unavailable (", "LLM answer abandoned")


def first_token_note(seconds: float) -> str:
    return (f"LLM answer abandoned: no response within {seconds:g} s of asking "
            "(NCCLBOT_LLM_FIRST_TOKEN_S); this is the deterministic answer.")


class Troubleshooter:
    """Answers questions about NCCL and distributed-training failures.

    `respond` replaces `bot.agent.respond` (tests); `chat_model` is handed to the agent
    instead of the one the settings describe; `agent_store` keeps the agent's per-thread
    memory (by default in the bot's state database when an LLM answers).
    """

    def __init__(self, settings: Settings, *, respond: Respond | None = None,
                 chat_model: Any = None, agent_store: Any = None,
                 analyzer: Analyzer | None = None, cache_size: int = 64) -> None:
        self.settings = settings
        #: the one decision whether an LLM answers: the settings name a provider (or a test
        #: hands in a chat model)
        self.uses_llm = bool(settings.llm_provider) or chat_model is not None
        self._respond = respond
        self._chat_model = chat_model
        self._agent_store = agent_store
        self._store_lock = threading.Lock()
        self.analyses = AnalysisCache(analyzer or make_analyzer(settings), cache_size)
        self.breaker = CircuitBreaker()

    def llm_available(self) -> bool:
        """Whether the next answer would ask the LLM: one is configured and the circuit
        breaker is not open."""
        return self.uses_llm and self.breaker.allows()

    def agent_store(self) -> Any:
        """The agent's per-thread memory: the one given, else the bot's state database,
        opened on the first LLM answer (a deterministic answer never opens it)."""
        with self._store_lock:
            if self._agent_store is None:
                from bot.state.threads import open_thread_store

                self._agent_store = open_thread_store(self.settings)
            return self._agent_store

    # -- analysis -------------------------------------------------------------------------

    def key_of(self, question: Question) -> str:
        """The logs' key, and the local memory's version: an incident stored or forgotten
        since (by any replica) makes the next answer a new analysis."""
        from bot.memory.runtime import version

        key = question.logs_key or logs_fingerprint(question.logs)
        v = version(self.settings) if question.logs else None
        return key if v is None else f"{key}:m{v}"

    def has_analysis(self, question: Question) -> bool:
        """Whether the question's logs are analysed already (no wait for an analysis)."""
        return not question.logs or self.analyses.get(self.key_of(question)) is not None

    def analysis(self, question: Question) -> Analysis | None:
        """The analysis of the question's logs (None without logs), made once per set."""
        if not question.logs:
            return None
        return self.analyses.analysis(self.key_of(question), question.logs)

    # -- answering ------------------------------------------------------------------------

    def answer(self, question: Question, *, confirm_probe: Any = None, strict: bool = False,
               llm: bool | None = None, **agent_extra: Any) -> Answer:
        """The answer; never raises, except bad input with `strict` (the CLI prints that
        in one line). `confirm_probe(proposal) -> bool | str` is asked before the agent runs
        a probe it proposed (a string declines it, saying why); `llm=False` answers
        deterministically even when an LLM is configured (Slack posts that first, and hang
        samples are answered so); `agent_extra` goes to `bot.agent.respond`."""
        try:
            if llm is False or question.samples:
                return self._deterministic(question)
            return self._answer(question, confirm_probe, agent_extra)
        except NcclbotError as exc:
            if strict:
                raise
            return Answer.error(exc.message, exc.hint)
        except ModuleNotFoundError:
            if strict:  # a missing extra: the CLI names it in one line
                raise
            log.exception("the answering backend failed")
            return Answer.failure(sys.exc_info()[1] or RuntimeError("missing module"))
        except Exception as exc:
            log.exception("the answering backend failed")
            return Answer.failure(exc)

    def _answer(self, q: Question, confirm_probe: Any, agent_extra: dict[str, Any]) -> Answer:
        if not self.uses_llm:
            return self._deterministic(q)
        if not self.breaker.allows():
            return self._deterministic(q, (
                f"LLM skipped for {self.breaker.left_s():.0f} s more: it failed "
                f"{self.breaker.threshold} times in a row; this is the deterministic answer.",))
        respond = self._respond or _agent_respond()
        extra = dict(agent_extra)
        extra.setdefault("store", self.agent_store())
        if self._chat_model is not None:
            extra.setdefault("model", self._chat_model)
        watch = LlmWatch()  # the agent reads its attachments itself
        found = self._within_first_token(watch, lambda: respond(
            q.text, attachments=q.logs, thread_id=q.thread_id, settings=self.settings,
            confirm_probe=confirm_probe, lang=q.lang, watch=watch, **extra))
        if found is None:  # the LLM did not answer in time: it goes on alone, unheard
            self.breaker.record(True)
            return self._deterministic(q, (first_token_note(self.settings.llm_first_token_s),))
        self.breaker.record(any(n.startswith(OUTAGE_NOTES) for n in found.notes))
        if isinstance(found, Answer):
            return found
        # the agent declined: the deterministic answer over the thread's logs, saying why
        asked = q if set(found.logs) == set(q.logs) else replace(q, logs=found.logs, logs_key=None)
        answer = self._deterministic(asked, found.notes, LlmUse(used=False))
        if found.record is not None:
            found.record(answer.summary)
        return answer

    def _within_first_token(self, watch: LlmWatch,
                            call: Callable[[], Answer | AgentDeclined]
                            ) -> Answer | AgentDeclined | None:
        """`call()` on a thread of its own; None when its first LLM request waited longer
        than `llm_first_token_s` for a response (the call is then abandoned: it makes no
        further requests and its answer is dropped). The one bound of a hung LLM, for the
        CLI and Slack alike."""
        done = threading.Event()
        result: list[Answer | AgentDeclined] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                result.append(call())
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                failure.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name="ncclbot-llm-answer", daemon=True).start()
        limit = self.settings.llm_first_token_s
        while not done.wait(0.1):
            if watch.waiting_s() > limit:
                watch.abandon()
                log.warning("LLM abandoned: no response within %g s", limit)
                return None
        if failure:
            raise failure[0]
        return result[0]

    def _deterministic(self, q: Question, notes: Sequence[str] = (),
                       llm: LlmUse | None = None) -> Answer:
        return deterministic(q, self.analysis(q), self.settings, notes=notes, llm=llm)

    def follow_up(self, question: Question, previous: Answer) -> FollowUp:
        """A short reply to a question asked in a thread that already has `previous`: the
        agent's (with its thread memory) when an LLM answers, else the sentences of the
        thread's answer and cards that address it. Never raises."""
        from bot.answering.followup import agent_follow_up, follow_up, question_lang

        lang = question_lang(question.text)
        try:
            if self.uses_llm:
                return agent_follow_up(self.answer(question), lang)
            from bot.answering.knowledge import bundled_cards

            return follow_up(question.text, previous, {c.id: c for c in bundled_cards()})
        except Exception as exc:  # a failed reply is still a reply
            log.exception("the follow-up failed")
            return FollowUp(Answer.failure(exc).text, lang, matched=False)

    def warm(self) -> float:
        """Compile the log scanner, open the retrieval index and index the team's local
        incidents, so the first question after a start does not pay for them. Returns the
        seconds it took."""
        import time

        t0 = time.monotonic()
        from bot.answering.knowledge import bundled_cards, bundled_index
        from bot.logs.analyze import analyzer_for
        from bot.memory.runtime import index_for
        from bot.retrieval.search import get_retriever

        cards = list(bundled_cards())
        analyzer_for(cards, self.settings.cache_dir)
        get_retriever(self.settings, cards, progress=False).search("NCCL watchdog timeout", 1)
        index_for(self.settings, bundled_index(self.settings.cache_dir))  # the team's incidents
        return time.monotonic() - t0


def _agent_respond() -> Respond:
    from bot.agent import respond

    return respond
