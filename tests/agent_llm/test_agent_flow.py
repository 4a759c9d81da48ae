"""The agent end to end: real langchain-openai client against a scripted local server."""

from __future__ import annotations

import json
from pathlib import Path

from bot.agent import respond
from bot.agent.state import InMemoryConversationStore
from tests.agent_llm.conftest import (
    OOM_CARD,
    PLANTED,
    analysis,
    answer,
    assert_no_secrets,
    grounded_final,
    settings_for,
)
from tests.agent_llm.llm_server import tool_messages

QUESTION = f"Why did my job die? (my slack token is {PLANTED['slack']}, github {PLANTED['github']})"


def test_tool_calls_then_grounded_answer(llm, crash_log: Path, store: InMemoryConversationStore):
    srv = llm({"tool_calls": [("analyze_log", {"attachment": "train.log"}),
                              ("search_knowledge", {"query": "CUDA out of memory one rank"})]},
              {"tool_calls": [("get_card", {"id": OOM_CARD})]},
              grounded_final)
    out = respond(QUESTION, [crash_log], thread_id="t1", settings=settings_for(srv), store=store)

    assert sorted(t["tool"] for t in out["llm"]["tools"]) == ["analyze_log", "get_card",
                                                              "search_knowledge"]
    assert len(srv.requests) == 3
    assert out["llm"]["used"] and out["notes"] == [] and out["llm"]["dropped"] == []
    rc = out["diagnosis"]["root_causes"][0]
    assert (rc["card"], rc["category"], rc["confidence"]) == (OOM_CARD, "rank_crashed", 0.85)
    ev = rc["evidence"][0]
    assert ev["file"] == "train.log" and "OutOfMemoryError" in ev["text"]
    assert crash_log.read_text().splitlines()[ev["line"] - 1].startswith(ev["text"][:40])
    assert PLANTED["openai"] not in ev["text"]
    # Remediation: the card's own steps 3 and 2, in the model's order, both languages.
    from bot.service import bundled_cards

    card = next(c for c in bundled_cards() if c.id == OOM_CARD)
    assert out["remediation"]["en"] == [card.remediation.en[2], card.remediation.en[1]]
    assert out["remediation"]["zh"] == [card.remediation.zh[2], card.remediation.zh[1]]
    assert out["citations"][0]["card"] == OOM_CARD
    # Placeholders are mapped back for the user, never sent to the model.
    assert "liangxianchen-funasr-15wh-train-lxc0-w-0" in out["explanation"]
    assert "HOST_1" in json.dumps(srv.requests[-1])
    assert_no_secrets(srv)
    # The contract of bot.answer stays.
    for key in ("diagnosis", "remediation", "citations", "explanation", "notes"):
        assert key in out


def test_follow_up_reuses_thread_state(llm, crash_log: Path, store: InMemoryConversationStore):
    srv = llm({"tool_calls": [("analyze_log", {"attachment": "train.log"}),
                              ("search_knowledge", {"query": "CUDA OOM"})]},
              grounded_final)
    respond("What happened?", [crash_log], thread_id="t2", settings=settings_for(srv),
            store=store)
    first = analysis(srv.requests[1])
    # The follow-up: no tools called; the model cites the card retrieved in turn one and
    # quotes evidence from the earlier analysis.
    rc = first["root_causes"][0]
    srv.script.append(answer(explanation="Lower the batch size first.",
                             root_causes=[{"category": "rank_crashed", "card": OOM_CARD,
                                           "confidence": 0.7, "evidence": rc["evidence"][:1]}],
                             remediation=[{"card": OOM_CARD, "step": 2}], citations=[OOM_CARD]))
    out = respond("And how do I fix it?", thread_id="t2", settings=settings_for(srv), store=store)
    assert out["llm"]["tools"] == [] and out["notes"] == []
    assert out["diagnosis"]["root_causes"][0]["evidence"]
    sent = json.dumps(srv.requests[-1])
    assert OOM_CARD in sent and "What happened?" in sent  # context and history were sent
    state = store.get("t2")
    assert state is not None and OOM_CARD in state.seen_cards and len(state.turns) == 2
    assert_no_secrets(srv)


def test_tool_errors_go_back_to_the_model(llm, crash_log: Path):
    srv = llm({"tool_calls": [("get_card", {"id": "cuda-oom-on-one-rank"}),
                              ("analyze_log", {"attachment": "missing.log"}),
                              ("no_such_tool", {"x": 1}),
                              ("search_knowledge", {"wrong_arg": "oom"})]},
              {"tool_calls": [("analyze_log", {"attachment": "train.log"}),
                              ("get_card", {"id": OOM_CARD})]},
              grounded_final)
    out = respond("why?", [crash_log], settings=settings_for(srv))
    results = tool_messages(srv.requests[1])  # in call order
    assert [r["status"] for r in results] == ["error"] * 4
    assert results[0]["invocation"] == 'get_card({"id": "cuda-oom-on-one-rank"})'
    assert "Did you mean" in results[0]["error"] and OOM_CARD in results[0]["error"]
    assert "no attachment 'missing.log'" in results[1]["error"]
    assert results[2]["invocation"].startswith("no_such_tool(") and "unknown tool" in \
        results[2]["error"]
    assert "bad arguments" in results[3]["error"]
    assert out["llm"]["used"] and out["diagnosis"]["root_causes"][0]["card"] == OOM_CARD
