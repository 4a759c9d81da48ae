"""The tool-calling loop (LangChain `create_agent`) and the final-answer parse with one repair."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ToolCallRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from bot.agent.answer_model import AgentAnswer, AnswerParseError, parse_answer, schema_text
from bot.agent.context import ToolContext, invocation
from bot.agent.providers import GuardedChatModel
from bot.agent.tools import call_tool, langchain_tools
from bot.answering.contract import ToolCall
from bot.knowledge.taxonomy import load_taxonomy
from tools.registry import TOOLS

MAX_TOOL_ROUNDS = 8

SYSTEM = """You are ncclbot, a troubleshooting assistant for NCCL and distributed-training \
failures (PyTorch, torchrun, DeepSpeed, Megatron, FSDP, ...). Ground every claim in tools:
- Call analyze_log for each attachment before diagnosing it; its evidence lines (file, line, \
text) are the only evidence you may quote.
- Find incident cards with search_knowledge and read them with get_card. Cite only card ids \
that a tool returned in this conversation. Never invent ids.
- A root cause's category must be one of the taxonomy ids below, normally the card's category.
- Remediation: reference steps of the cited cards by number ({{"card": ID, "step": N}}); you \
may order them and add a short note, never new steps.
- You never run probes. To suggest one, call propose_probe(node, preset) (presets: {presets}); \
a person confirms it. node_topology and node_env read a named node.
- HOST_n, IP_n, USER_n and [REDACTED] are placeholders for hidden values: keep them as they are.
Taxonomy ids: {categories}
When you are done, reply with ONLY one JSON object (no tool call, no prose around it) matching \
this JSON schema:
{schema}"""

LANGUAGE = {
    "en": "Write the explanation in English.",
    "zh": "Write the explanation in Chinese (用中文写 explanation).",
    "both": "Write the explanation in English, then the same in Chinese.",
}

REPAIR = ("Your final answer could not be used: {error}. Reply with ONLY the JSON object "
          "matching the schema, citing only cards returned by tools.")


def system_prompt() -> str:
    cats = ", ".join(c.id for c in load_taxonomy())
    return SYSTEM.format(presets=", ".join(TOOLS["probe"].presets), categories=cats,
                         schema=schema_text())


class ToolGuard(AgentMiddleware):
    """Unknown tools and tool crashes come back to the model as ToolResults, never raise."""

    def __init__(self, ctx: ToolContext) -> None:
        super().__init__()
        self.ctx = ctx

    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
                       ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        if request.tool is None:
            content = call_tool(self.ctx, call["name"], dict(call.get("args") or {}))
            return ToolMessage(content=content, tool_call_id=call["id"], name=call["name"],
                               status="error")
        try:
            return handler(request)
        except Exception as exc:  # noqa: BLE001 - reported to the model so it can correct itself
            from tools.result import ToolResult

            result = ToolResult.failed(call["name"], invocation(call["name"], call["args"]),
                                       f"{type(exc).__name__}: {exc}")
            self.ctx.trace.append(ToolCall(tool=call["name"], args=call["args"],
                                           status="error", error=result.error))
            return ToolMessage(content=result.model_dump_json(), tool_call_id=call["id"],
                               name=call["name"], status="error")


@dataclass
class RunResult:
    answer: AgentAnswer | None
    messages: list[BaseMessage]
    notes: list[str] = field(default_factory=list)


def context_message(ctx: ToolContext, attachments: list[str]) -> str:
    """What the thread already knows, for the model (cards, analyses, attachments)."""
    parts = []
    if attachments:
        parts.append("Attachments (call analyze_log with these names): " + ", ".join(attachments))
    if ctx.state.seen_cards:
        seen = [{"card": c, "title": ctx.cards[c].title.en} for c in ctx.state.seen_cards
                if c in ctx.cards]
        parts.append("Cards already returned in this thread (citable): "
                     + json.dumps(seen, ensure_ascii=False))
    for name, analysis in ctx.state.analyses.items():
        parts.append(f"Earlier analyze_log({name}) result: "
                     + json.dumps(analysis.for_model(), ensure_ascii=False)[:4000])
    return "\n".join(parts)


def history(ctx: ToolContext) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for turn in ctx.state.turns[-4:]:
        out.append(HumanMessage(turn.question))
        out.append(AIMessage(turn.explanation or turn.summary or "(answered)"))
    return out


def run_agent(model: GuardedChatModel, ctx: ToolContext, question: str,
              attachments: list[str]) -> RunResult:
    """Let the model call tools, then parse its JSON answer (one repair round on failure)."""
    graph = create_agent(model, langchain_tools(ctx), system_prompt=system_prompt(),
                         middleware=[ToolGuard(ctx)])
    context = context_message(ctx, attachments)
    text = f"{context}\n\nQuestion: {question}" if context else question
    text += "\n\n" + LANGUAGE.get(ctx.lang, LANGUAGE["both"])
    messages: list[BaseMessage] = [*history(ctx), HumanMessage(text)]
    config: RunnableConfig = {"recursion_limit": 2 * MAX_TOOL_ROUNDS + 2}
    state = graph.invoke(cast("Any", {"messages": messages}), config)
    messages = list(state["messages"])
    last = messages[-1]
    try:
        return RunResult(parse_answer(last.content), messages)
    except AnswerParseError as exc:
        first_error = str(exc)
    repair = [*messages, HumanMessage(REPAIR.format(error=first_error[:500]))]
    reply = model.bind_tools(langchain_tools(ctx)).invoke(repair)
    try:
        return RunResult(parse_answer(reply.content), [*repair, reply],
                         [f"the model's first answer was malformed ({first_error[:200]}); "
                          "it was asked once to repair it"])
    except AnswerParseError as exc:
        return RunResult(None, [*repair, reply],
                         [f"the model's answer was malformed twice ({str(exc)[:200]})"])
