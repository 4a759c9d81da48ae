"""The tools the model may call. Each returns one `ToolResult` as JSON and never raises.

search_knowledge(query), get_card(id), analyze_log(attachment); one tool per node tool whose
`ToolSpec.llm` offers it (node_topology, node_env, node_libs: the node and the fields the
spec names); propose_probe(node, preset) from the probe's presets. Each schema is a pydantic
model (types, bounds, defaults, enums). Probes are only proposed: a person with the right
confirms them (Slack button, CLI prompt); the agent never runs one itself.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, create_model

from bot.agent.attachments import analyze_log, log_diagnoses
from bot.agent.backends import error_text, load_nodes, search_cards
from bot.agent.context import ToolContext, invocation
from bot.agent.models import CardDetail, CardSummary, FoundCard, ProbeProposal
from bot.answering.contract import ToolCall
from bot.errors import NcclbotError
from bot.knowledge.cards import Card
from tools.params import ToolSpec
from tools.registry import TOOLS
from tools.result import ToolResult

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

MAX_TOOL_CHARS = 12_000

def _out(result: ToolResult) -> str:
    text = result.model_dump_json()
    if len(text) <= MAX_TOOL_CHARS:
        return text
    data = json.dumps(result.data, ensure_ascii=False)[: MAX_TOOL_CHARS // 2]
    cut = result.model_copy(update={"data": {"truncated": True, "data_prefix": data}})
    return cut.model_dump_json()


def card_summary(card: Card) -> CardSummary:
    """A card as the model sees it in a list (its root cause cut at 400 characters)."""
    return CardSummary(card=card.id, category=card.category, title=card.title.en,
                       root_cause=card.root_cause.en[:400])


def search_knowledge(ctx: ToolContext, query: str) -> ToolResult:
    """Hybrid retrieval; a failure raises and comes back to the model as a tool error."""
    inv = invocation("search_knowledge", {"query": query})
    try:
        hits = search_cards(query, k=5, settings=ctx.settings,
                            log_diagnosis=next(iter(log_diagnoses(ctx)), None))
    except ImportError as exc:
        return ToolResult.unavailable("search_knowledge", inv, "retrieval is not installed "
                                      f"(pip install 'ncclbot[retrieval]'): {exc}")
    found: list[FoundCard] = []
    for hit in hits:
        card = ctx.cards.get(hit.card)
        if card is None:
            continue
        ctx.state.see_card(card.id)
        found.append(FoundCard(**card_summary(card).model_dump(), score=round(hit.score, 3),
                               why=hit.why[:3],
                               channels={ch: info.rank for ch, info in hit.channels.items()}))
    return ToolResult(tool="search_knowledge", status="success", invocation=inv,
                      data={"query": query, "cards": [f.for_model() for f in found]})


def get_card(ctx: ToolContext, id: str) -> ToolResult:
    inv = invocation("get_card", {"id": id})
    card = ctx.cards.get(id)
    if card is None:
        close = difflib.get_close_matches(id, list(ctx.cards), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else " Use search_knowledge first."
        return ToolResult.failed("get_card", inv, f"no card {id!r}.{hint}")
    ctx.state.see_card(card.id)
    detail = CardDetail(
        card=card.id, category=card.category, title=card.title.en,
        also=list(card.also), symptoms=list(card.symptoms.en), root_cause=card.root_cause.en,
        remediation=[f"{i + 1}. {s}" for i, s in enumerate(card.remediation.en)],
        verify=list(card.verify.en), probes=list(card.probes), sources=list(card.source_urls),
        remediation_zh=([f"{i + 1}. {s}" for i, s in enumerate(card.remediation.zh)]
                        if ctx.lang == "zh" else None))
    return ToolResult(tool="get_card", status="success", invocation=inv,
                      data=detail.for_model())


def run_node_tool(ctx: ToolContext, tool: str, node: str, args: dict[str, JsonValue]
                  ) -> ToolResult:
    """A read-only node tool the LLM may call (its ToolSpec's `llm`): the arguments it set,
    over the parameters always sent."""
    spec = TOOLS[tool]
    params = {**(spec.llm.fixed if spec.llm else {}), **args}
    return ctx.nodes.run(node, tool, params or None)


def propose(ctx: ToolContext, tool: str, node: str, preset: str) -> ToolResult:
    """Propose a tool with presets (the probe) on a node; a person must confirm it."""
    name = f"propose_{tool}"
    inv = invocation(name, {"node": node, "preset": preset})
    presets = TOOLS[tool].presets
    if preset not in presets:
        return ToolResult.failed(name, inv, f"unknown preset {preset!r}; known: "
                                 f"{', '.join(presets)}")
    try:
        load_nodes(ctx.settings).get(node)
    except NcclbotError as exc:
        return ToolResult.failed(name, inv, error_text(exc))
    proposal = ProbeProposal(node=node, preset=preset, params=dict(presets[preset]))
    if proposal not in ctx.state.proposals:
        ctx.state.proposals.append(proposal)
    return ToolResult(tool=name, status="success", invocation=inv,
                      data={"proposed": {"node": node, "preset": preset},
                            "note": "Proposed only: a person with the right must confirm it. "
                                    "Do not state probe results."})


@dataclass(frozen=True)
class LlmToolDef:
    """One tool the model may call: its schema (a pydantic model: types, defaults, enums)
    and what runs it."""

    name: str
    description: str
    args: type[BaseModel]
    run: Callable[[ToolContext, dict[str, JsonValue]], ToolResult]


_NODE_ARG = (str, Field(description="a node name from the inventory (or its placeholder)"))


def _plain(name: str, description: str, func: Callable[..., ToolResult], **fields: Any
           ) -> LlmToolDef:
    model = create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    return LlmToolDef(name, description, model, lambda ctx, a: func(ctx, **a))


def _node_tool(spec: ToolSpec) -> LlmToolDef:
    assert spec.llm is not None
    chosen = {f: (spec.params.model_fields[f].annotation, spec.params.model_fields[f])
              for f in spec.llm.fields}
    model = create_model(f"{spec.llm.name}_args", __config__=ConfigDict(extra="forbid"),
                         node=_NODE_ARG, **chosen)  # type: ignore[call-overload]
    need = spec.prerequisite_text()
    text = f"{spec.description} Runs on the node's agent" + (f"; it {need}." if need else ".")

    def run(ctx: ToolContext, a: dict[str, JsonValue]) -> ToolResult:
        node = a.pop("node")
        return run_node_tool(ctx, spec.name, str(node), a)

    return LlmToolDef(spec.llm.name, text, model, run)


def _proposal_tool(spec: ToolSpec) -> LlmToolDef:
    presets = list(spec.presets)
    about = "; ".join(f"{k}: " + ", ".join(f"{p}={v}" for p, v in params.items())
                      for k, params in spec.presets.items())
    choice: Any = Literal[tuple(presets)]  # the enum the model sees
    model = create_model(
        f"propose_{spec.name}_args", __config__=ConfigDict(extra="forbid"), node=_NODE_ARG,
        preset=(choice, Field(presets[0], description=f"which {spec.name} to run: {about}")))
    return LlmToolDef(
        f"propose_{spec.name}",
        f"Propose this on a node; a person must confirm it, you never run it: "
        f"{spec.description} Presets: {', '.join(presets)}.", model,
        lambda ctx, a: propose(ctx, spec.name, str(a["node"]), str(a["preset"])))


def _tool_table() -> dict[str, LlmToolDef]:
    defs = [
        _plain("search_knowledge", "Search the curated NCCL/distributed-training incident "
               "cards. Returns card ids with title, category and root cause. Only cards "
               "returned by a tool may be cited.", search_knowledge,
               query=(str, Field(max_length=2000, description="what to look for"))),
        _plain("get_card", "Read one incident card by id: symptoms, root cause, numbered "
               "remediation steps, verification, sources.", get_card,
               id=(str, Field(max_length=200, description="a card id a tool returned"))),
        _plain("analyze_log", "Analyze an attached crash log by its file name: signatures "
               "hit, ranked root causes with evidence lines (file, line, text), suspect "
               "ranks/hosts, versions and environment seen.", analyze_log,
               attachment=(str, Field(max_length=500, description="the attachment's name"))),
        *(_node_tool(s) for s in TOOLS.values() if s.llm is not None),
        *(_proposal_tool(s) for s in TOOLS.values() if s.presets),
    ]
    return {d.name: d for d in defs}


TOOL_DEFS = _tool_table()


def tool_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments, as the model is sent it."""
    schema = TOOL_DEFS[name].args.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def call_tool(ctx: ToolContext, name: str, args: dict[str, JsonValue]) -> str:
    """Run one tool by name; any failure comes back as a ToolResult with the invocation."""
    with ctx.lock:  # LangChain may run a turn's tool calls in parallel threads
        return _call_tool(ctx, name, args)


def _call_tool(ctx: ToolContext, name: str, args: dict[str, JsonValue]) -> str:
    inv = invocation(name, args)
    tool = TOOL_DEFS.get(name)
    if tool is None:
        result = ToolResult.failed(name, inv, f"unknown tool; known: {', '.join(TOOL_DEFS)}")
    else:
        real = ctx.redactor.restore_obj(args)
        try:
            checked = tool.args.model_validate(real).model_dump(exclude_unset=True)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'args'}: {e['msg']}"
                                 for e in exc.errors())
            result = ToolResult.failed(name, inv, f"bad arguments: {problems}")
        else:
            if "preset" in tool.args.model_fields and "preset" not in checked:
                checked["preset"] = tool.args.model_fields["preset"].default
            try:
                result = tool.run(ctx, checked)
            except Exception as exc:  # noqa: BLE001 - tool errors go back to the model
                result = ToolResult.failed(name, inv, f"{type(exc).__name__}: {exc}")
    ctx.trace.append(ToolCall(tool=name, args=args, status=result.status, error=result.error))
    return _out(result)


def langchain_tools(ctx: ToolContext) -> list[BaseTool]:
    """The tools as LangChain StructuredTools bound to `ctx` (imports langchain lazily); each
    schema is its pydantic model's (types, bounds, defaults, the presets' enum)."""
    from langchain_core.tools import StructuredTool

    def make(name: str) -> BaseTool:
        def run(**kwargs: JsonValue) -> str:
            return call_tool(ctx, name, kwargs)

        return StructuredTool.from_function(func=run, name=name,
                                            description=TOOL_DEFS[name].description,
                                            args_schema=tool_schema(name), infer_schema=False)

    return [make(n) for n in TOOL_DEFS]
