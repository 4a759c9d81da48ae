"""One answer from the LLM agent: run, validate, compose; `AgentDeclined` otherwise.

Whatever goes wrong with the LLM (not configured, unreachable, too slow, over its token
budget, out of tool rounds, malformed or ungrounded answer) the caller gets
`AgentDeclined` with notes saying why; the Troubleshooter answers deterministically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langgraph.errors import GraphRecursionError

from bot.agent.answer_model import AgentAnswer, ProbeSuggestion
from bot.agent.attachments import learn_attachment_names
from bot.agent.backends import (
    DETERMINISTIC,
    NO_PROVIDER,
    AgentDeclined,
    ClientNodeBackend,
    LlmWatch,
    NodeBackend,
    inventory_names,
    load_nodes,
)
from bot.agent.compose import compose_answer
from bot.agent.context import Analyze, ToolContext
from bot.agent.graph import MAX_TOOL_ROUNDS, run_agent
from bot.agent.logtext import line_reader
from bot.agent.models import ConfirmProbe, ProbeProposal
from bot.agent.providers import (
    Budget,
    BudgetExceededError,
    GuardedChatModel,
    ProviderError,
    make_chat_model,
)
from bot.agent.redact import Redactor
from bot.agent.validate import NodeNames, Outcome, validate_answer
from bot.answering.contract import Answer, LlmUse, ProbeRun, SimilarIncident, resolve_lang
from bot.answering.knowledge import bundled_cards
from bot.config import Settings, load_settings
from bot.errors import NcclbotError
from bot.knowledge.taxonomy import category_ids
from bot.state.threads import InMemoryThreadStore, ThreadState, ThreadStore, Turn
from tools.registry import TOOLS

#: The whole answer may take this many per-call timeouts and per-call token caps.
DEADLINE_CALLS = 3
TOKEN_CALLS = 4


@lru_cache(maxsize=1)
def default_store() -> InMemoryThreadStore:
    return InMemoryThreadStore()


def _state_for(store: ThreadStore, thread_id: str | None) -> ThreadState:
    found = store.get(thread_id) if thread_id else None
    return found or ThreadState(thread_id=thread_id)


def respond(question: str, attachments: Sequence[str | Path] = (), thread_id: str | None = None,
            settings: Settings | None = None, confirm_probe: ConfirmProbe | None = None, *,
            lang: str = "both", model: BaseChatModel | None = None,
            store: ThreadStore | None = None, nodes: NodeBackend | None = None,
            on_request: Callable[[list[BaseMessage]], None] | None = None,
            analyze: Analyze | None = None,
            watch: LlmWatch | None = None) -> Answer | AgentDeclined:
    """Answer `question` (with log attachments) through the LLM agent, or say why not
    (`AgentDeclined`); see bot.agent. `watch`: told of each request and response (a caller
    that stopped waiting abandons it: no further calls, and the thread's state is left as
    it was)."""
    settings = settings or load_settings()
    lang = resolve_lang(question, lang)
    store = store if store is not None else default_store()
    state = _state_for(store, thread_id)
    for p in attachments:
        state.attachments[Path(p).name] = str(p)
    all_paths = list(dict.fromkeys(state.attachments.values()))
    redactor = Redactor(settings.redact_hosts, state.placeholders)

    def finish_fallback(notes: list[str]) -> AgentDeclined:
        def record(summary: str) -> None:
            state.placeholders = redactor.mapping
            state.turns.append(Turn(question=question, summary=summary))
            store.put(state)

        waited = watch is None or not watch.abandoned.is_set()
        return AgentDeclined(tuple(notes), tuple(all_paths), record if waited else None)

    try:
        chat = model if model is not None else make_chat_model(settings)
    except ProviderError as exc:
        return finish_fallback([f"LLM unavailable ({exc}); {DETERMINISTIC}"])
    if chat is None:
        return finish_fallback([f"{NO_PROVIDER}; {DETERMINISTIC}"])

    notes: list[str] = []
    inventory = None
    if settings.nodes_file is not None:
        try:
            inventory = load_nodes(settings)
        except NcclbotError as exc:
            notes.append(f"node inventory not read ({exc.message}); node tools and probes "
                         "will fail until NCCLBOT_NODES_FILE is fixed")
    redactor.learn("HOST", inventory_names(inventory))
    cards = {c.id: c for c in bundled_cards()}
    ctx = ToolContext(settings=settings, cards=cards, state=state, redactor=redactor,
                      nodes=nodes or ClientNodeBackend(settings), lang=lang, analyze=analyze)
    learn_attachment_names(ctx)
    guarded = GuardedChatModel(
        inner=chat, redactor=redactor, on_request=on_request, watch=watch,
        budget=Budget(settings.llm_timeout_s * DEADLINE_CALLS,
                      settings.llm_max_tokens * TOKEN_CALLS))
    try:
        run = run_agent(guarded, ctx, question, list(state.attachments))
    except GraphRecursionError:
        return finish_fallback([*notes, f"the LLM was still calling tools after "
                                f"{MAX_TOOL_ROUNDS} rounds and was stopped; {DETERMINISTIC}"])
    except BudgetExceededError as exc:
        return finish_fallback([*notes, f"LLM answer abandoned: {exc}; {DETERMINISTIC}"])
    except Exception as exc:  # noqa: BLE001 - any provider failure means the fallback
        reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        return finish_fallback([*notes, f"LLM unavailable ({reason}); {DETERMINISTIC}"])
    if run.answer is None:
        return finish_fallback([*notes, *run.notes,
                                f"the LLM gave no usable answer; {DETERMINISTIC}"])

    outcome = _validate(run.answer, ctx, list(inventory.nodes) if inventory else [],
                        inventory_names(inventory), guarded.shown())
    notes.extend([*run.notes, *map(redactor.restore, outcome.notes)])
    if not outcome.grounded:
        return finish_fallback([*notes, "nothing in the LLM's answer could be grounded in "
                                f"retrieved cards; {DETERMINISTIC}"])
    if watch is not None and watch.abandoned.is_set():  # nobody waits: no probe, no turn
        return finish_fallback([*notes, "the caller stopped waiting for the LLM"])
    final = redactor.restore_model(outcome.answer)
    _merge_probes(state, final.probes)
    probe_runs = _confirm(ctx, confirm_probe, notes)
    suspects = [s for found in state.analyses.values() for s in found.suspects]
    seen: dict[str, SimilarIncident] = {}
    for found in state.analyses.values():
        for inc in found.similar_incidents:
            seen.setdefault(inc.source, inc)
    answer = compose_answer(
        final, cards, lang, suspects=suspects, notes=notes, proposals=state.proposals,
        similar_incidents=sorted(seen.values(), key=lambda i: -i.score)[:3],
        probe_results=probe_runs,
        llm=LlmUse(used=True, model=getattr(chat, "model_name", None)
                   or getattr(chat, "model", None),
                   tools=[redactor.restore_model(t) for t in ctx.trace],
                   dropped=[redactor.restore_model(d) for d in outcome.dropped]),
        thread_id=thread_id)
    state.placeholders = redactor.mapping
    state.turns.append(Turn(question=question, explanation=final.explanation,
                            summary=answer.summary))
    store.put(state)
    return answer


def _validate(answer: AgentAnswer, ctx: ToolContext, node_names: Sequence[str],
              inventory_hosts: Sequence[str], shown: str) -> Outcome:
    """Validate the model's answer (in placeholder space, as the model saw everything);
    `node_names`: the inventory's nodes (none when it is missing or unreadable),
    `inventory_hosts`: every name in it; `shown`: the last request the model was sent."""
    state, redactor = ctx.state, ctx.redactor
    log_hosts = [h for found in state.analyses.values() for h in found.hosts]
    learned = [v for k, v in redactor.mapping.items() if k.startswith("HOST_")]
    analyzed = state.analyzed_files()
    read_line = line_reader({n: p for n, p in state.attachments.items() if n in state.log_files})

    def line_at(file: str, line: int) -> str | None:
        real = redactor.restore(file)
        if real not in analyzed:
            return None
        text = state.evidence.get(real, {}).get(str(line))
        if text is None:
            text = read_line(real, line)
        return redactor.redact(text) if text is not None else None

    return validate_answer(
        answer,
        cards={c: ctx.cards[c] for c in state.seen_cards if c in ctx.cards},
        categories=category_ids(),
        line_at=line_at,
        known_evidence={redactor.redact(f): {n: redactor.redact(t) for n, t in lines.items()}
                        for f, lines in state.evidence.items()},
        presets=TOOLS["probe"].presets,
        analyzed_files={redactor.redact(f) for f in analyzed},
        known_nodes={redactor.redact(n) for n in node_names},
        all_card_ids=list(ctx.cards),
        node_names=NodeNames(
            known={*node_names, *(redactor.redact(n) for n in node_names)},
            naming=[*inventory_hosts, *log_hosts, *learned], seen=shown),
    )


def _merge_probes(state: ThreadState, probes: Sequence[ProbeSuggestion]) -> None:
    """Probes the final answer suggests (validated) become proposals a person can confirm."""
    for p in probes:
        if all(q.key != (p.node, p.preset) for q in state.proposals):
            state.proposals.append(ProbeProposal(node=p.node, preset=p.preset,
                                                 params=dict(TOOLS["probe"].presets[p.preset])))


def _confirm(ctx: ToolContext, confirm: ConfirmProbe | None,
             notes: list[str]) -> list[ProbeRun]:
    """Ask a person about each new proposal; run only the confirmed ones. The proposals
    declined for the same reason are one note: "probe not run (P on N, ...): reason"."""
    results = []
    why_not: dict[str, list[str]] = {}
    proposals = ctx.state.proposals
    for i, prop in enumerate(proposals):
        if prop.status != "proposed" or confirm is None:
            continue
        try:
            said = confirm(prop)
        except Exception as exc:  # noqa: BLE001 - a failed prompt is a refusal
            notes.append(f"probe confirmation failed ({exc}); not run")
            said = False
        ok = not isinstance(said, str) and bool(said)
        if isinstance(said, str):
            why_not.setdefault(said, []).append(f"{prop.preset} on {prop.node}")
        proposals[i] = prop.model_copy(update={"status": "confirmed" if ok else "declined"})
        if ok:
            result = ctx.nodes.run(prop.node, "probe", dict(prop.params))
            results.append(ProbeRun(node=prop.node, preset=prop.preset, result=result))
    notes += [f"probe not run ({', '.join(probes)}): {why}" for why, probes in why_not.items()]
    return results
