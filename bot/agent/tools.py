"""The tools the model may call. Each returns one `ToolResult` as JSON and never raises.

search_knowledge(query), get_card(id), analyze_log(attachment), node_topology(node),
node_env(node), propose_probe(node, preset). Probes are only proposed: a person with
the right confirms them (Slack button, CLI prompt); the agent never runs one.
"""

from __future__ import annotations

import difflib
import inspect
import json
from collections.abc import Callable
from typing import Any

from bot.agent.attachments import analyze_log, log_diagnoses
from bot.agent.backends import error_text, load_nodes, search_cards
from bot.agent.context import ToolContext, invocation
from bot.errors import NcclbotError
from bot.knowledge.cards import Card
from tools.probe.presets import PROBE_PRESETS
from tools.result import ToolResult

MAX_TOOL_CHARS = 12_000

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
    """Hybrid retrieval; a failure raises and comes back to the model as a tool error."""
    inv = invocation("search_knowledge", {"query": query})
    try:
        hits = search_cards(query, k=5, settings=ctx.settings,
                            log_diagnosis=next(iter(log_diagnoses(ctx)), None))
    except ImportError as exc:
        return ToolResult.unavailable("search_knowledge", inv, "retrieval is not installed "
                                      f"(pip install 'ncclbot[retrieval]'): {exc}")
    found = []
    for hit in hits:
        card = ctx.cards.get(hit["card"])
        if card is None:
            continue
        ctx.state.see_card(card.id)
        found.append({**_card_summary(card, hit["score"]), "why": hit["why"][:3],
                      "channels": {ch: info.get("rank") for ch, info in hit["channels"].items()}})
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


def node_topology(ctx: ToolContext, node: str) -> ToolResult:
    return ctx.nodes.run(node, "topo", None)


def node_env(ctx: ToolContext, node: str) -> ToolResult:
    return ctx.nodes.run(node, "env", {"import_torch": False})


def propose_probe(ctx: ToolContext, node: str, preset: str) -> ToolResult:
    inv = invocation("propose_probe", {"node": node, "preset": preset})
    if preset not in PROBE_PRESETS:
        return ToolResult.failed("propose_probe", inv, f"unknown preset {preset!r}; known: "
                                 f"{', '.join(PROBE_PRESETS)}")
    try:
        load_nodes(ctx.settings).get(node)
    except NcclbotError as exc:
        return ToolResult.failed("propose_probe", inv, error_text(exc))
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
        real = ctx.redactor.restore_obj(args)
        try:
            inspect.signature(func).bind(ctx, **real)
        except TypeError as exc:
            result = ToolResult.failed(name, inv, f"bad arguments: {exc}")
        else:
            try:
                result = func(ctx, **real)
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
