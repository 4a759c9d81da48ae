"""The agent end to end: real langchain-openai client against a scripted local server."""

from __future__ import annotations

import json
from pathlib import Path

from bot.state.threads import InMemoryThreadStore
from tests.agent_llm.conftest import (
    HOSTS,
    OOM_CARD,
    PLANTED,
    QUESTION,
    analysis,
    answer,
    assert_no_secrets,
    grounded_final,
    inventory,
    settings_for,
)
from tests.agent_llm.llm_server import ScriptedLLM, tool_messages
from tests.answer_json import respond


def test_tool_calls_then_grounded_answer(llm, crash_log: Path, store: InMemoryThreadStore):
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
    # the agent's answer carries the analysis's "seen before" (public threads), in the contract
    from bot.answering.contract import Answer

    assert isinstance(out["similar_incidents"], list) and len(out["similar_incidents"]) <= 3
    assert all(i["source"].startswith("https://") for i in out["similar_incidents"])
    Answer.model_validate(out)
    # Remediation: the card's own steps 3 and 2, in the model's order, both languages.
    from bot.answering.knowledge import bundled_cards

    card = next(c for c in bundled_cards() if c.id == OOM_CARD)
    assert out["remediation"]["en"] == [card.remediation.en[2], card.remediation.en[1]]
    assert out["remediation"]["zh"] == [card.remediation.zh[2], card.remediation.zh[1]]
    assert out["citations"][0]["card"] == OOM_CARD
    # Placeholders are mapped back for the user, never sent to the model.
    assert "liangxianchen-funasr-15wh-train-lxc0-w-0" in out["explanation"]
    assert "HOST_1" in json.dumps(srv.requests[-1])
    assert_no_secrets(srv)
    # Not even the first request (the question alone, before any tool ran) carries a host
    # of the question: sjc-a100-017 by its shape, alpha7 because the log's NCCL prefix
    # names it, and they come back for the user.
    first = json.dumps(srv.requests[0])
    for host in ("sjc-a100-017", "alpha7", "dgx01", "n017", "node-a", "harry"):
        assert host not in first
    # the tools of one step run in threads: find the call by name, not by its place
    analyzed = next(t for t in out["llm"]["tools"] if t["tool"] == "analyze_log")
    assert analyzed["args"] == {"attachment": "train.log"}
    # The contract of bot.answering.answer stays.
    for key in ("diagnosis", "remediation", "citations", "explanation", "notes"):
        assert key in out


def test_follow_up_reuses_thread_state(llm, crash_log: Path, store: InMemoryThreadStore):
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
    leaky = f"oom --password {PLANTED['cli_password']} on sjc-a100-017"
    srv = llm({"tool_calls": [("get_card", {"id": "cuda-oom-on-one-rank"}),
                              ("analyze_log", {"attachment": "missing.log"}),
                              ("no_such_tool", {"x": 1}),
                              ("search_knowledge", {"wrong_arg": leaky})]},
              {"tool_calls": [("analyze_log", {"attachment": "train.log"}),
                              ("get_card", {"id": OOM_CARD})]},
              grounded_final)
    out = respond(QUESTION, [crash_log], settings=settings_for(srv))
    results = tool_messages(srv.requests[1])  # in call order
    assert [r["status"] for r in results] == ["error"] * 4
    assert results[0]["invocation"] == 'get_card({"id": "cuda-oom-on-one-rank"})'
    assert "Did you mean" in results[0]["error"] and OOM_CARD in results[0]["error"]
    assert "no attachment 'missing.log'" in results[1]["error"]
    assert results[2]["invocation"].startswith("no_such_tool(") and "unknown tool" in \
        results[2]["error"]
    assert "bad arguments" in results[3]["error"]
    assert out["llm"]["used"] and out["diagnosis"]["root_causes"][0]["card"] == OOM_CARD
    # Tool errors echo the invocation: the echoed arguments are redacted like the rest.
    assert "[REDACTED]" in results[3]["invocation"]
    assert_no_secrets(srv)


def test_search_knowledge_is_hybrid_retrieval(llm, crash_log: Path):
    srv = llm({"tool_calls": [("analyze_log", {"attachment": "train.log"})]},
              {"tool_calls": [("search_knowledge",
                               {"query": "CUDA out of memory on one rank, others time out"})]},
              grounded_final)
    out = respond(QUESTION, [crash_log], settings=settings_for(srv))
    found = tool_messages(srv.requests[2])[-1]
    assert found["status"] == "success", found
    cards = {c["card"]: c for c in found["data"]["cards"]}
    # Ranked by the fused channels: BM25 and dense on the query, and the log's signatures.
    assert set(cards[OOM_CARD]["channels"]) == {"bm25", "dense", "signature"}
    assert all(isinstance(r, int) for r in cards[OOM_CARD]["channels"].values())
    assert cards[OOM_CARD]["why"]
    assert out["llm"]["used"]
    assert_no_secrets(srv)


def test_retrieval_failure_is_a_tool_error_not_a_silent_fallback(llm, tmp_path: Path):
    broken = tmp_path / "index-is-a-file"
    broken.write_text("not a directory")
    srv = llm({"tool_calls": [("search_knowledge", {"query": "socket ifname"})]},
              {"tool_calls": [("get_card", {"id": "nccl-socket-ifname-matches-no-interface"})]},
              answer(explanation="ifname", citations=["nccl-socket-ifname-matches-no-interface"]))
    out = respond(QUESTION, settings=settings_for(srv, index_dir=broken))
    result = tool_messages(srv.requests[1])[0]
    assert result["status"] == "error"
    assert result["invocation"] == 'search_knowledge({"query": "socket ifname"})'
    assert "FileExistsError" in result["error"]
    assert out["llm"]["tools"][0]["status"] == "error"
    assert [c["card"] for c in out["citations"]] == ["nccl-socket-ifname-matches-no-interface"]
    assert_no_secrets(srv, log=False)


def test_hosts_from_the_question_never_reach_the_first_request():
    """Without a log, the question's names are recognised by their shape or context alone
    (alpha7 is not: only a log's structure tells it is a host)."""
    with ScriptedLLM([answer(explanation="x")]) as srv:
        respond(QUESTION, settings=settings_for(srv))
    first = srv.raw[0].decode()
    assert "Why did my job die?" in first
    for h in HOSTS:
        if h in QUESTION:
            assert json.dumps(h)[1:-1] not in first, h


def test_explanation_names_no_node_outside_the_inventory_and_logs(llm, crash_log: Path,
                                                                  tmp_path: Path):
    """A node the model invents in its explanation (shaped like the inventory's) is removed
    with a note; nodes of the inventory and hosts of the log stay."""
    def final(request: dict) -> dict:
        body = json.loads(grounded_final(request)["content"])
        body["explanation"] += " gpu-node-9 and HOST_99 hung too; gpu-node-8 is fine."
        return {"content": json.dumps(body)}

    srv = llm({"tool_calls": [("analyze_log", {"attachment": "train.log"}),
                              ("search_knowledge", {"query": "CUDA out of memory one rank"})]},
              {"tool_calls": [("get_card", {"id": OOM_CARD})]}, final)
    nodes = inventory(tmp_path, "gpu-node-7", "gpu-node-8")
    out = respond("why did my job die?", [crash_log], thread_id="t9",
                  settings=settings_for(srv, nodes_file=nodes))
    assert out["llm"]["used"]
    text = out["explanation"]
    assert "gpu-node-9" not in text and "HOST_99" not in text
    assert text.count("[unverified node]") == 2
    assert "liangxianchen-funasr-15wh-train-lxc0-w-0" in text and "gpu-node-8 is fine" in text
    removed = [n for n in out["notes"] if n.startswith("removed node name")]
    assert [n.split("'")[1] for n in removed] == ["gpu-node-9", "HOST_99"]
    assert {"kind": "explanation_node", "node": "gpu-node-9"} in out["llm"]["dropped"]
