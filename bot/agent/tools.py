"""The tools the model may call. Each returns one `ToolResult` as JSON and never raises.

search_knowledge(query), get_card(id), analyze_log(attachment), node_topology(node),
node_env(node), propose_probe(node, preset). Probes are only proposed: a person with
the right confirms them (Slack button, CLI prompt); the agent never runs one.
"""

from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.backends import NodeBackend, search_cards
from bot.agent.redact import Redactor
from bot.agent.state import ThreadState
from bot.config import Settings
from bot.knowledge.cards import Card
from tools.result import ToolResult

MAX_TOOL_CHARS = 12_000
MAX_EVIDENCE = 5

#: Probe presets the agent may propose (parameters of the node `probe` tool).
PROBE_PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"collectives": ["all_reduce"], "min_bytes": 1 << 20, "max_bytes": 64 << 20,
              "iters": 10, "timeout": 120.0},
    "allreduce": {"collectives": ["all_reduce"], "min_bytes": 1024, "max_bytes": 1 << 30,
                  "timeout": 300.0},
    "full": {"min_bytes": 1024, "max_bytes": 1 << 30, "timeout": 600.0},
    "gloo": {"backend": "gloo", "collectives": ["all_reduce"], "max_bytes": 16 << 20,
             "timeout": 120.0},
}


@dataclass
class ToolContext:
    """What the tools share within one conversation turn."""

    settings: Settings
    cards: dict[str, Card]
    state: ThreadState
    redactor: Redactor
    nodes: NodeBackend
    lang: str = "both"
    trace: list[dict[str, Any]] = field(default_factory=list)
    analyze: Callable[[str, Settings, list[Card]], tuple[Any, Any]] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def invocation(name: str, args: dict[str, Any]) -> str:
    return f"{name}({json.dumps(args, ensure_ascii=False, sort_keys=True)})"


def _out(result: ToolResult) -> str:
    text = result.model_dump_json()
    if len(text) <= MAX_TOOL_CHARS:
        return text
    data = json.dumps(result.data, ensure_ascii=False)[: MAX_TOOL_CHARS // 2]
    cut = result.model_copy(update={"data": {"truncated": True, "data_prefix": data}})
    return cut.model_dump_json()


def _card_summary(card: Card, score: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"card": card.id, "category": card.category, "title": card.title.en,
                           "root_cause": card.root_cause.en[:400]}
    if score is not None:
        out["score"] = round(score, 3)
    return out


def search_knowledge(ctx: ToolContext, query: str) -> ToolResult:
    inv = invocation("search_knowledge", {"query": query})
    hits = search_cards(query, list(ctx.cards.values()), k=5, settings=ctx.settings)
    for cid, _ in hits:
        ctx.state.see_card(cid)
    found = [_card_summary(ctx.cards[cid], score) for cid, score in hits]
    return ToolResult(tool="search_knowledge", status="success", invocation=inv,
                      data={"query": query, "cards": found})


def get_card(ctx: ToolContext, id: str) -> ToolResult:
    inv = invocation("get_card", {"id": id})
    card = ctx.cards.get(id)
    if card is None:
        close = difflib.get_close_matches(id, list(ctx.cards), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else " Use search_knowledge first."
        return ToolResult.failed("get_card", inv, f"no card {id!r}.{hint}")
    ctx.state.see_card(card.id)
    zh = ctx.lang in ("zh",)
    data = {
        **_card_summary(card),
        "also": card.also,
        "symptoms": card.symptoms.en,
        "root_cause": card.root_cause.en,
        "remediation": [f"{i + 1}. {s}" for i, s in enumerate(card.remediation.en)],
        "verify": card.verify.en,
        "probes": card.probes,
        "sources": card.source_urls,
    }
    if zh:
        data["remediation_zh"] = [f"{i + 1}. {s}" for i, s in enumerate(card.remediation.zh)]
    return ToolResult(tool="get_card", status="success", invocation=inv, data=data)


def _find_attachment(state: ThreadState, name: str) -> tuple[str, str] | None:
    if name in state.attachments:
        return name, state.attachments[name]
    for shown, path in state.attachments.items():
        if Path(path).name == Path(name).name or shown.endswith(name):
            return shown, path
    return None


def _default_analyze(path: str, settings: Settings, cards: list[Card]) -> tuple[Any, Any]:
    from bot.logs.sources import expand_inputs
    from bot.service import analyze_sources

    return analyze_sources(expand_inputs([path]), settings, cards)


def analyze_log(ctx: ToolContext, attachment: str) -> ToolResult:
    inv = invocation("analyze_log", {"attachment": attachment})
    found = _find_attachment(ctx.state, attachment)
    if found is None:
        known = ", ".join(ctx.state.attachments) or "none"
        return ToolResult.failed("analyze_log", inv,
                                 f"no attachment {attachment!r}; attached: {known}")
    shown, path = found
    if shown in ctx.state.analyses:
        return ToolResult(tool="analyze_log", status="success", invocation=inv,
                          data=ctx.state.analyses[shown])
    analyze = ctx.analyze or _default_analyze
    try:
        report, diagnosis = analyze(path, ctx.settings, list(ctx.cards.values()))
    except Exception as exc:  # noqa: BLE001 - bad input is a result the model can explain
        return ToolResult.failed("analyze_log", inv, f"{type(exc).__name__}: {exc}")
    ctx.redactor.learn("HOST", sorted(report.hosts))
    causes = []
    for rc in diagnosis.root_causes[:4]:
        evidence = [e.to_dict() for e in rc.evidence[:MAX_EVIDENCE]]
        for e in evidence:
            ctx.state.evidence.setdefault(e["file"], {})[str(e["line"])] = e["text"]
        if rc.card:
            ctx.state.see_card(rc.card)
        causes.append({"category": rc.category, "card": rc.card,
                       "confidence": round(rc.confidence, 3), "evidence": evidence,
                       "why": rc.why[:3]})
    data = {
        "attachment": shown,
        "verdict": diagnosis.verdict,
        "root_causes": causes,
        "suspects": [s.to_dict() for s in diagnosis.suspects[:4]],
        "input": {k: v for k, v in report.summary().items() if k != "files"},
    }
    ctx.state.analyses[shown] = data
    return ToolResult(tool="analyze_log", status="success", invocation=inv, data=data)


def node_topology(ctx: ToolContext, node: str) -> ToolResult:
    return ctx.nodes.run(node, "topo", None)


def node_env(ctx: ToolContext, node: str) -> ToolResult:
    return ctx.nodes.run(node, "env", {"import_torch": False})


def propose_probe(ctx: ToolContext, node: str, preset: str) -> ToolResult:
    inv = invocation("propose_probe", {"node": node, "preset": preset})
    if preset not in PROBE_PRESETS:
        return ToolResult.failed("propose_probe", inv, f"unknown preset {preset!r}; known: "
                                 f"{', '.join(PROBE_PRESETS)}")
    proposal = {"node": node, "preset": preset, "params": PROBE_PRESETS[preset],
                "status": "proposed"}
    if proposal not in ctx.state.proposals:
        ctx.state.proposals.append(proposal)
    return ToolResult(tool="propose_probe", status="success", invocation=inv,
                      data={"proposed": {"node": node, "preset": preset},
                            "note": "Proposed only: a person with the right must confirm it. "
                                    "Do not state probe results."})


DESCRIPTIONS = {
    "search_knowledge": "Search the curated NCCL/distributed-training incident cards. Returns "
                        "card ids with title, category and root cause. Only cards returned by "
                        "a tool may be cited.",
    "get_card": "Read one incident card by id: symptoms, root cause, numbered remediation "
                "steps, verification, sources.",
    "analyze_log": "Analyze an attached crash log by its file name: signatures hit, ranked "
                   "root causes with evidence lines (file, line, text), suspect ranks/hosts, "
                   "versions and environment seen.",
    "node_topology": "GPU/NIC topology and GPU health of a node, from its node agent.",
    "node_env": "Environment of a node (NCCL_*/CUDA_* variables, versions, shm, ulimits, "
                "interfaces) with lint findings, from its node agent.",
    "propose_probe": "Propose an NCCL bandwidth probe on a node; a person must confirm it, "
                     "you never run it. Presets: " + ", ".join(PROBE_PRESETS) + ".",
}

_FUNCS: dict[str, Callable[..., ToolResult]] = {
    "search_knowledge": search_knowledge, "get_card": get_card, "analyze_log": analyze_log,
    "node_topology": node_topology, "node_env": node_env, "propose_probe": propose_probe,
}


def call_tool(ctx: ToolContext, name: str, args: dict[str, Any]) -> str:
    """Run one tool by name; any failure comes back as a ToolResult with the invocation."""
    with ctx.lock:  # LangChain may run a turn's tool calls in parallel threads
        return _call_tool(ctx, name, args)


def _call_tool(ctx: ToolContext, name: str, args: dict[str, Any]) -> str:
    inv = invocation(name, args)
    func = _FUNCS.get(name)
    if func is None:
        result = ToolResult.failed(name, inv, f"unknown tool; known: {', '.join(_FUNCS)}")
    else:
        try:
            result = func(ctx, **ctx.redactor.restore_obj(args))
        except TypeError as exc:
            result = ToolResult.failed(name, inv, f"bad arguments: {exc}")
        except Exception as exc:  # noqa: BLE001 - tool errors go back to the model
            result = ToolResult.failed(name, inv, f"{type(exc).__name__}: {exc}")
    ctx.trace.append({"tool": name, "args": args, "status": result.status,
                      "error": result.error})
    return _out(result)


def langchain_tools(ctx: ToolContext) -> list[Any]:
    """The tools as LangChain StructuredTools bound to `ctx` (imports langchain lazily)."""
    from langchain_core.tools import StructuredTool

    def make(name: str) -> Any:
        func = _FUNCS[name]
        params = [p for p in func.__code__.co_varnames[1: func.__code__.co_argcount]]

        def run(**kwargs: Any) -> str:
            return call_tool(ctx, name, kwargs)

        schema = {"type": "object", "properties": {p: {"type": "string"} for p in params},
                  "required": params}
        return StructuredTool.from_function(func=run, name=name, description=DESCRIPTIONS[name],
                                            args_schema=schema, infer_schema=False)

    return [make(n) for n in _FUNCS]
