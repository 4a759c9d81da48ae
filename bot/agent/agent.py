"""One answer from the LLM agent: run, validate, compose; the deterministic answer otherwise.

Whatever goes wrong with the LLM (not configured, unreachable, too slow, malformed or
ungrounded answer) the caller gets the deterministic answer with a note saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from bot.agent.answer_model import AgentAnswer
from bot.agent.backends import ClientNodeBackend, NodeBackend, deterministic_answer
from bot.agent.compose import compose_answer
from bot.agent.graph import run_agent
from bot.agent.logtext import line_reader
from bot.agent.providers import Budget, GuardedChatModel, ProviderError, make_chat_model
from bot.agent.redact import Redactor
from bot.agent.state import ConversationStore, InMemoryConversationStore, ThreadState, Turn
from bot.agent.tools import PROBE_PRESETS, ToolContext
from bot.agent.validate import validate_answer
from bot.config import Settings, load_settings
from bot.knowledge.taxonomy import category_ids
from bot.service import bundled_cards

#: The whole answer may take this many per-call timeouts and per-call token caps.
DEADLINE_CALLS = 3
TOKEN_CALLS = 4
ConfirmProbe = Callable[[dict[str, Any]], bool]


@lru_cache(maxsize=1)
def default_store() -> InMemoryConversationStore:
    return InMemoryConversationStore()


def _fallback(question: str, paths: Sequence[str], lang: str, settings: Settings,
              notes: Sequence[str]) -> dict[str, Any]:
    answer = deterministic_answer(question, paths, lang, settings)
    answer.setdefault("notes", []).extend(notes)
    answer.setdefault("explanation", "")
    answer["llm"] = {"used": False}
    return answer


def _state_for(store: ConversationStore, thread_id: str | None) -> ThreadState:
    found = store.get(thread_id) if thread_id else None
    return found or ThreadState(thread_id=thread_id)


def respond(question: str, attachments: Sequence[str | Path] = (), thread_id: str | None = None,
            settings: Settings | None = None, confirm_probe: ConfirmProbe | None = None, *,
            lang: str = "both", model: BaseChatModel | None = None,
            store: ConversationStore | None = None, nodes: NodeBackend | None = None,
            on_request: Callable[[list[BaseMessage]], None] | None = None) -> dict[str, Any]:
    """Answer `question` (with log attachments) through the LLM agent; see bot.agent."""
    settings = settings or load_settings()
    store = store if store is not None else default_store()
    state = _state_for(store, thread_id)
    paths = [str(p) for p in attachments]
    for p in paths:
        state.attachments[Path(p).name] = p
    all_paths = list(dict.fromkeys([*state.attachments.values()]))

    def finish_fallback(notes: list[str]) -> dict[str, Any]:
        answer = _fallback(question, all_paths, lang, settings, notes)
        state.turns.append(Turn(question=question, summary=str(answer.get("summary", ""))))
        store.put(state)
        return answer

    try:
        chat = model if model is not None else make_chat_model(settings)
    except ProviderError as exc:
        return finish_fallback([f"LLM unavailable ({exc}); this is the deterministic answer."])
    if chat is None:
        return finish_fallback(["LLM unavailable (no provider configured: set "
                                "NCCLBOT_LLM_PROVIDER); this is the deterministic answer."])

    cards = {c.id: c for c in bundled_cards()}
    redactor = Redactor(settings.redact_hosts, state.placeholders)
    redactor.learn("HOST", _inventory_names(settings))
    ctx = ToolContext(settings=settings, cards=cards, state=state, redactor=redactor,
                      nodes=nodes or ClientNodeBackend(settings), lang=lang)
    guarded = GuardedChatModel(
        inner=chat, redactor=redactor, on_request=on_request,
        budget=Budget(settings.llm_timeout_s * DEADLINE_CALLS,
                      settings.llm_max_tokens * TOKEN_CALLS))
    try:
        run = run_agent(guarded, ctx, question, list(state.attachments))
    except Exception as exc:  # noqa: BLE001 - any provider failure means the fallback
        reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        return finish_fallback([f"LLM unavailable ({reason}); this is the deterministic answer."])
    if run.answer is None:
        return finish_fallback([*run.notes, "the LLM gave no usable answer; this is the "
                                "deterministic answer."])

    read_line = line_reader(state.attachments)
    outcome = validate_answer(
        run.answer,
        cards={c: cards[c] for c in state.seen_cards if c in cards},
        categories=category_ids(),
        line_at=lambda f, n: _model_line(redactor, state, read_line, f, n),
        known_evidence={redactor.redact(f): {n: redactor.redact(t) for n, t in lines.items()}
                        for f, lines in state.evidence.items()},
        presets=PROBE_PRESETS,
    )
    notes = [*run.notes, *outcome.notes]
    if not outcome.grounded:
        return finish_fallback([*notes, "nothing in the LLM's answer could be grounded in "
                                "retrieved cards; this is the deterministic answer."])
    final = AgentAnswer.model_validate(redactor.restore_obj(outcome.answer.model_dump()))
    turn_proposals = _confirm(ctx, confirm_probe, notes)
    suspects = [s for data in state.analyses.values() for s in data.get("suspects", [])]
    answer = compose_answer(final, cards, lang, suspects=suspects, notes=notes,
                            proposals=state.proposals)
    if turn_proposals:
        answer["probe_results"] = turn_proposals
    answer["llm"] = {"used": True, "model": getattr(chat, "model_name", None)
                     or getattr(chat, "model", None),
                     "tools": redactor.restore_obj(ctx.trace), "dropped": outcome.dropped}
    answer["thread_id"] = thread_id
    state.placeholders = redactor.mapping
    state.turns.append(Turn(question=question, explanation=final.explanation,
                            summary=answer["summary"]))
    store.put(state)
    return answer


def _inventory_names(settings: Settings) -> list[str]:
    """Node names from NCCLBOT_NODES_FILE, so they are hidden from the model too."""
    if settings.nodes_file is None or not settings.redact_hosts:
        return []
    try:
        from bot.nodes.inventory import load_inventory

        inv = load_inventory(settings.nodes_file)
    except Exception:  # noqa: BLE001 - a bad inventory is reported by the node tools
        return []
    return [*inv.nodes, *(n.host for n in inv.nodes.values()), *inv.groups]


def _model_line(redactor: Redactor, state: ThreadState,
                read_line: Callable[[str, int], str | None], file: str, line: int) -> str | None:
    """A log line as the model saw it (redacted), for validating quoted evidence."""
    real = redactor.restore(file)
    text = state.evidence.get(real, {}).get(str(line))
    if text is None:
        text = read_line(real, line)
    return redactor.redact(text) if text is not None else None


def _confirm(ctx: ToolContext, confirm: ConfirmProbe | None,
             notes: list[str]) -> list[dict[str, Any]]:
    """Ask a person about each new proposal; run only the confirmed ones."""
    results = []
    for prop in ctx.state.proposals:
        if prop.get("status") != "proposed" or confirm is None:
            continue
        try:
            ok = bool(confirm(dict(prop)))
        except Exception as exc:  # noqa: BLE001 - a failed prompt is a refusal
            notes.append(f"probe confirmation failed ({exc}); not run")
            ok = False
        prop["status"] = "confirmed" if ok else "declined"
        if ok:
            result = ctx.nodes.run(prop["node"], "probe", dict(prop["params"]))
            results.append({"node": prop["node"], "preset": prop["preset"],
                            "result": result.model_dump()})
    return results
