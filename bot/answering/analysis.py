"""The evidence: logs (and Flight Recorder dumps) analysed into a report and a diagnosis,
and the answer from that analysis alone (or from hang samples)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

from bot.answering.answer import build_answer
from bot.answering.contract import Answer, LlmUse
from bot.answering.knowledge import bundled_index, knowledge_for
from bot.config import Settings
from bot.diagnosis.engine import Diagnosis, diagnose
from bot.errors import InputError
from bot.knowledge.cards import Card
from bot.logs.analyze import analyzer_for
from bot.logs.flight_recorder import (
    MAX_DUMP_BYTES,
    DumpError,
    FrDump,
    analyze_dumps,
    looks_like_dump,
)
from bot.logs.fr_sandbox import DumpInput, read_dumps
from bot.logs.model import LogReport
from bot.logs.sources import ATTACH_HINT, Limits, LogSource, SourceStats
from tools.hang.model import HangSample


def analyze_sources(
    sources: Sequence[LogSource],
    settings: Settings | None = None,
    cards: Sequence[Card] | None = None,
) -> tuple[LogReport, Diagnosis]:
    cache = settings.cache_dir if settings else None
    cards = list(cards if cards is not None else knowledge_for(cache)[0])
    limits = Limits(settings.max_input_bytes, settings.max_zip_ratio) if settings else Limits()
    dumps, texts, dump_stats = split_dumps(sources)
    if not texts and not dumps and dump_stats:  # only dumps, none of them usable
        why = [f"{s.name}: {p.removeprefix('skipped: ')}" for s in dump_stats
               for p in s.problems]
        more = f"; and {len(why) - 5} more" if len(why) > 5 else ""
        raise InputError("nothing to analyze: " + "; ".join(why[:5]) + more, hint=ATTACH_HINT)
    if texts or not dumps:
        report = analyzer_for(cards, cache).analyze(texts, limits)
    else:
        report = LogReport(engine="flight-recorder")
    report.sources += dump_stats
    report.flight_recorder = analyze_dumps(dumps)
    index = None
    if report.shows_failure:
        from bot.memory.runtime import index_for  # the team's own incidents, current

        index = index_for(settings, bundled_index(cache))
    return report, diagnose(report, cards, incidents=index)


def split_dumps(sources: Sequence[LogSource]) -> tuple[list[FrDump], list[LogSource],
                                                        list[SourceStats]]:
    """Flight Recorder dumps (read and checked in one sandboxed child, `read_dumps`) apart
    from text logs; a dump that cannot be used is skipped with a note on its source."""
    texts: list[LogSource] = []
    stats: list[SourceStats] = []
    found: list[LogSource] = []
    for src in sources:
        if not src.closeable:  # stdin: a text log
            texts.append(src)
            continue
        try:
            with src.opener() as fh:
                head = fh.read(8192)
        except Exception:  # noqa: BLE001 - the text reader says what went wrong
            texts.append(src)
            continue
        if not looks_like_dump(head, src.name):
            texts.append(src)
            continue
        stats.append(src.stats)
        found.append(src)
    dumps: list[FrDump] = []
    got = read_dumps([DumpInput(src.name, partial(_read_dump, src)) for src in found])
    for src, dump in zip(found, got, strict=True):
        if isinstance(dump, DumpError):
            why = str(dump)
            src.stats.problems.append(f"skipped: {why.removeprefix(f'{src.name}: ')}")
            continue
        src.stats.problems += dump.notes
        if dump.rank is None:
            src.stats.problems.append("skipped: the rank is not in the file name (torch "
                                      "writes one dump per rank, the rank last)")
            continue
        dumps.append(dump)
    return dumps, texts, stats


def _read_dump(src: LogSource) -> bytes:
    """A dump's bytes (one more than a dump may have, so that too many is seen)."""
    try:
        with src.opener() as fh:
            data = fh.read(MAX_DUMP_BYTES + 1)
    except OSError:
        raise
    except Exception as exc:
        raise OSError(f"{type(exc).__name__} while reading it") from exc
    src.stats.bytes_read = len(data)
    return data


def answer_from_analysis(report: LogReport, diagnosis: Diagnosis, cards: Sequence[Card],
                         lang: str = "both", brief: bool = False,
                         facts: Mapping[str, str] | None = None, *,
                         notes: Sequence[str] = (), llm: LlmUse | None = None) -> Answer:
    """The answer from the logs alone, with what went wrong reading them and, when nothing
    was found, what was read (`brief`: without listing what was looked for), then `notes`.
    With `facts` the causes are ranked again with those answers as evidence (same
    neighbours)."""
    if facts:
        diagnosis = diagnose(report, list(cards), neighbours=diagnosis.neighbours, facts=facts)
    read = source_notes(report)
    if diagnosis.verdict == "no_evidence" and lang == "zh":
        looked_for = "" if brief else "（没有 NCCL 报错、watchdog 超时、Traceback 或信号）"
        read.append(f"读取了 {len(report.sources)} 个文件的 {report.total_lines} 行"
                    f"（{report.total_bytes} 字节），没有发现故障证据{looked_for}。")
    elif diagnosis.verdict == "no_evidence":
        looked_for = "" if brief else (" (no NCCL errors, watchdog timeouts, tracebacks or "
                                       "signals)")
        read.append(
            f"read {report.total_bytes} bytes, {report.total_lines} lines from "
            f"{len(report.sources)} file(s) and found no failure evidence{looked_for}."
        )
    return build_answer(diagnosis, list(cards), report, lang, facts=facts,
                        notes=[*read, *notes], llm=llm)


def source_notes(report: LogReport) -> list[str]:
    """Each input's reading problems (skipped zip members, decoding, limits) as notes; one
    problem shared by many inputs (the members not read after a zip bomb) is one note."""
    by_problem: dict[str, list[str]] = {}
    for src in report.sources:
        for p in src.problems:
            by_problem.setdefault(p, []).append(src.name)
    notes: list[str] = []
    for src in report.sources:
        for p in src.problems:
            names = by_problem[p]
            if len(names) <= 3:
                notes.append(f"{src.name}: {p}")
            elif src.name == names[0]:
                notes.append(f"{len(names)} inputs ({names[0]} … {names[-1]}): {p}")
    return notes


#: the card for a live hang where one rank is in its own code and the others wait for it
HOST_STUCK_CARD = "live-hang-one-rank-outside-the-collective"


def answer_hang(samples: Sequence[HangSample], settings: Settings | None = None,
                lang: str = "both", *, notes: Sequence[str] = (),
                llm: LlmUse | None = None) -> Answer:
    """The answer for a live hang: the nodes' `hang` samples triangulated (which rank, where,
    what kind of hang), with cards, similar incidents and next steps like any diagnosis;
    the headline is what the samples show; the triangulation's notes, then `notes`."""
    from bot.answering.contract import decide_verdict
    from bot.diagnosis.hang import headline, note_in, triangulate
    from bot.diagnosis.hang_zh import node_note_zh
    from bot.logs.crossrank import Suspect

    cards = list(knowledge_for(settings.cache_dir if settings else None)[0])
    verdict = triangulate(samples)
    report = LogReport(engine="hang")
    report.hosts.update(s.host for s in samples)
    diagnosis = diagnose(report, cards, extra=verdict.signals, extra_observed=True)
    diagnosis.suspects = [Suspect(c.rank, c.host, c.reason, 1.0) for c in verdict.culprits]
    if verdict.kind == "host_stuck" and any(c.id == HOST_STUCK_CARD for c in cards):
        for rc in diagnosis.root_causes:  # the card for exactly this, whatever words it shares
            if rc.category == "straggler_or_imbalance":
                rc.card = HOST_STUCK_CARD
    top = diagnosis.root_causes[0].certainty if diagnosis.root_causes else None
    decided = decide_verdict(top, logs_given=True,
                             log_failure=verdict.kind not in ("unknown", "progressing"))
    # the headline in each language; the notes (one language) in Chinese for a Chinese answer:
    # the triangulation's and the nodes' (`note_in`), and of `notes` those the node wrote (a
    # node that found no rank); the others (why the LLM did not answer) as they are
    one = "zh" if lang == "zh" else "en"
    more = [(node_note_zh(n, fallback=False) or n) if one == "zh" else n for n in notes]
    return build_answer(diagnosis, cards, None, lang, verdict=decided,
                        headline={lg: headline(verdict, lg) for lg in ("en", "zh")},
                        notes=[*(note_in(n, one) for n in verdict.notes), *more], llm=llm)
