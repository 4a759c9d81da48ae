"""The troubleshooting service: what the CLI, the agent and Slack call (knows nothing of them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, BinaryIO, TypeVar

from bot.answer import build_answer
from bot.config import Settings
from bot.diagnosis.engine import Diagnosis, diagnose
from bot.diagnosis.nearest import IncidentIndex
from bot.errors import KnowledgeError
from bot.knowledge.cards import Card, load_cards
from bot.knowledge.incidents import Incident, load_incidents
from bot.logs.analyze import analyzer_for
from bot.logs.model import LogReport
from bot.logs.sources import Limits, LogSource, expand_inputs

T = TypeVar("T")


def _bundled(load: Callable[[], list[T]], what: str) -> tuple[T, ...]:
    try:
        return tuple(load())
    except ValueError as exc:
        raise KnowledgeError(
            f"the knowledge base has a defective {what}: {exc}",
            hint="Run `ncclbot knowledge check` for the full list.",
        ) from exc


@lru_cache(maxsize=1)
def bundled_cards() -> tuple[Card, ...]:
    return _bundled(load_cards, "card")


@lru_cache(maxsize=1)
def bundled_incidents() -> tuple[Incident, ...]:
    return _bundled(load_incidents, "incident")


@lru_cache(maxsize=1)
def bundled_index() -> IncidentIndex:
    """The nearest-incident index over every bundled incident and card (once per process)."""
    return IncidentIndex(bundled_incidents(), bundled_cards())


def analyze_sources(
    sources: Sequence[LogSource],
    settings: Settings | None = None,
    cards: Sequence[Card] | None = None,
) -> tuple[LogReport, Diagnosis]:
    cards = list(cards if cards is not None else bundled_cards())
    limits = Limits(settings.max_input_bytes, settings.max_zip_ratio) if settings else Limits()
    cache = settings.cache_dir if settings else None
    report = analyzer_for(cards, cache).analyze(sources, limits)
    return report, diagnose(report, cards, incidents=bundled_index())


def analyze_paths(
    paths: Sequence[str],
    settings: Settings | None = None,
    lang: str = "both",
    stdin: BinaryIO | None = None,
) -> dict[str, Any]:
    """Analyze log files (or '-' for stdin) and return the answer dict."""
    cards = list(bundled_cards())
    report, diagnosis = analyze_sources(expand_inputs(paths, stdin), settings, cards)
    return answer_from_analysis(report, diagnosis, cards, lang)


def answer_from_analysis(report: LogReport, diagnosis: Diagnosis, cards: Sequence[Card],
                         lang: str = "both", brief: bool = False) -> dict[str, Any]:
    """The answer from the logs alone, with what went wrong reading them and, when nothing
    was found, what was read (`brief`: without listing what was looked for)."""
    answer = add_source_notes(build_answer(diagnosis, list(cards), report, lang), report)
    if diagnosis.verdict == "no_evidence":
        looked_for = "" if brief else (" (no NCCL errors, watchdog timeouts, tracebacks or "
                                       "signals)")
        answer.setdefault("notes", []).append(
            f"read {report.total_bytes} bytes, {report.total_lines} lines from "
            f"{len(report.sources)} file(s) and found no failure evidence{looked_for}."
        )
    return answer


def add_source_notes(answer: dict[str, Any], report: LogReport) -> dict[str, Any]:
    """Each input's reading problems (skipped zip members, decoding, limits) as notes."""
    for src in report.sources:
        answer.setdefault("notes", []).extend(f"{src.name}: {p}" for p in src.problems)
    return answer
