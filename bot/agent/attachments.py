"""Attached logs: analysed once per turn, their host names learned before the model sees
anything, and the `analyze_log` tool over them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bot.agent.backends import Analysis
from bot.agent.context import ToolContext, invocation
from bot.agent.models import CauseFound, LogAnalysis
from bot.answering.answer import similar_incidents
from bot.config import Settings
from bot.knowledge.cards import Card
from tools.result import ToolResult

if TYPE_CHECKING:
    from bot.diagnosis.engine import Diagnosis

MAX_EVIDENCE = 5
#: How much of each attached log is read for names before the first request (the hosts
#: of a job show up in its first lines: NCCL's init, the launcher's, nccl-tests' devices).
SCAN_BYTES = 1 << 20


def find_attachment(ctx: ToolContext, name: str) -> tuple[str, str] | None:
    """(display name, path) of the attachment the model named."""
    attachments = ctx.state.attachments
    if name in attachments:
        return name, attachments[name]
    for shown, path in attachments.items():
        if Path(path).name == Path(name).name or shown.endswith(name):
            return shown, path
    return None


def _default_analyze(path: str, settings: Settings, cards: list[Card]) -> Analysis:
    from bot.answering.analysis import analyze_sources
    from bot.logs.sources import expand_inputs

    return analyze_sources(expand_inputs([path]), settings, cards)


def analysed(ctx: ToolContext, name: str) -> Analysis | Exception:
    """The (report, diagnosis) of one attachment, analysed at most once per turn; an
    exception (bad input) is kept and returned, to be reported by analyze_log."""
    if name not in ctx.analysed:
        analyze = ctx.analyze or _default_analyze
        try:
            ctx.analysed[name] = analyze(ctx.state.attachments[name], ctx.settings,
                                         list(ctx.cards.values()))
        except Exception as exc:  # noqa: BLE001 - bad input is a result the model can explain
            ctx.analysed[name] = exc
    return ctx.analysed[name]


def _head(path: str) -> str:
    """The first SCAN_BYTES of each log in an attachment (archive members included)."""
    from bot.logs.sources import expand_inputs

    parts = []
    for src in expand_inputs([path]):
        fh = src.opener()
        try:
            parts.append(fh.read(SCAN_BYTES).decode("utf-8", "replace"))
        finally:
            if src.closeable:
                fh.close()
    return "\n".join(parts)


def learn_attachment_names(ctx: ToolContext) -> None:
    """Before the first request: the hosts, IPs and users named by the attachments' file
    names, found by analysis and marked by the logs' own structure (in the head of each),
    so that a name the question shares with a log is hidden from the first call. (Names
    recognisable by their shape are found in the question itself.)"""
    if not ctx.redactor.hosts:
        return
    for name, path in ctx.state.attachments.items():
        ctx.redactor.learn_text(" ".join(dict.fromkeys([name, Path(path).name])))
        if name in ctx.state.analyses:
            continue  # analysed in an earlier turn: its names are in the thread's mapping
        found = analysed(ctx, name)
        if isinstance(found, Exception):
            continue  # analyze_log reports it
        ctx.redactor.learn("HOST", sorted(found[0].hosts))
        ctx.redactor.learn_structure(_head(path))


def log_diagnoses(ctx: ToolContext) -> list[Diagnosis]:
    """The diagnoses of this turn's analysed attachments (for retrieval's signature channel)."""
    return [found[1] for found in ctx.analysed.values() if not isinstance(found, Exception)]


def analyze_log(ctx: ToolContext, attachment: str) -> ToolResult:
    inv = invocation("analyze_log", {"attachment": attachment})
    found = find_attachment(ctx, attachment)
    if found is None:
        known = ", ".join(ctx.state.attachments) or "none"
        return ToolResult.failed("analyze_log", inv,
                                 f"no attachment {attachment!r}; attached: {known}")
    shown, _ = found
    if shown in ctx.state.analyses:
        return ToolResult(tool="analyze_log", status="success", invocation=inv,
                          data=ctx.state.analyses[shown].for_model())
    result = analysed(ctx, shown)
    if isinstance(result, Exception):
        return ToolResult.failed("analyze_log", inv, f"{type(result).__name__}: {result}")
    report, diagnosis = result
    ctx.redactor.learn("HOST", sorted(report.hosts))
    causes = []
    for rc in diagnosis.root_causes[:4]:
        evidence = [e.out() for e in rc.evidence[:MAX_EVIDENCE]]
        for e in evidence:
            ctx.state.evidence.setdefault(e.file, {})[str(e.line)] = e.text
        if rc.card:
            ctx.state.see_card(rc.card)
        causes.append(CauseFound(category=rc.category, card=rc.card,
                                 confidence=round(rc.confidence, 3), evidence=evidence,
                                 why=rc.why[:3]))
    analysis = LogAnalysis(
        attachment=shown,
        files=[s.name for s in report.sources],
        verdict=diagnosis.verdict,
        root_causes=causes,
        suspects=[s.out() for s in diagnosis.suspects[:4]],
        similar_incidents=similar_incidents(diagnosis),
        input=report.summary(),
    )
    ctx.state.analyses[shown] = analysis
    ctx.state.log_files[shown] = [s.name for s in report.sources]
    return ToolResult(tool="analyze_log", status="success", invocation=inv,
                      data=analysis.for_model())
