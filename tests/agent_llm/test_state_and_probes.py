"""Thread state round-trips through JSON (in memory and SQLite); probes are proposed, checked
against the inventory, and run only when confirmed."""

from __future__ import annotations

import threading
from pathlib import Path

from bot.agent.models import ProbeProposal
from bot.state.threads import (
    InMemoryThreadStore,
    SqliteThreadStore,
    ThreadState,
    Turn,
)
from tests.agent_llm.conftest import (
    OOM_CARD,
    PLANTED,
    QUESTION,
    RecordedNodes,
    analysis,
    answer,
    assert_no_secrets,
    grounded_final,
    inventory,
    settings_for,
)
from tests.agent_llm.llm_server import tool_messages
from tests.answer_json import respond
from tools.result import Finding, ToolResult

IFNAME_CARD = "nccl-socket-ifname-matches-no-interface"


def test_state_round_trips_through_json():
    s = ThreadState(thread_id="C1:123", attachments={"a.log": "/tmp/a.log"},
                    seen_cards=[OOM_CARD], placeholders={"HOST_1": "node-a"},
                    turns=[Turn(question="q", explanation="e")])
    assert ThreadState.model_validate_json(s.model_dump_json()) == s
    store = InMemoryThreadStore(max_threads=1)
    store.put(s)
    assert store.get("C1:123") == s
    store.put(ThreadState(thread_id="other"))
    assert store.get("C1:123") is None  # bounded


ENV = ToolResult(tool="env", status="success", invocation="env {}",
                 data={"env": {"NCCL_SOCKET_IFNAME": "eth9", "HF_TOKEN": PLANTED["hf"],
                               "NCCL_DEBUG": "INFO", "WANDB_API_KEY": PLANTED["wandb_env"],
                               "SLURM_JOB_USER": "harry", "HOME": "/home/erin"},
                       "hostname": "gpu-node-7.cluster.local",
                       "cmdline": f"python train.py --password={PLANTED['password']}",
                       "argv": ["python", "train.py", "--api-key", PLANTED["argv"]],
                       "db": {"password": int(PLANTED["json_number"]),
                              "tokens": [PLANTED["token_list"]]},
                       "peers": ["sjc-a100-017", "2001:db8::8a2e:370:7334"]},
                 findings=[Finding(severity="warn", rule="ifname-missing",
                                   message="NCCL_SOCKET_IFNAME=eth9 matches no interface")])


def _probe_script() -> list:
    return [
        {"tool_calls": [("node_env", {"node": "HOST_1"}),
                        ("search_knowledge", {"query": "NCCL_SOCKET_IFNAME no interface"})]},
        {"tool_calls": [("propose_probe", {"node": "HOST_1", "preset": "quick"}),
                        ("propose_probe", {"node": "HOST_1", "preset": "rm-rf"})]},
        answer(explanation="NCCL_SOCKET_IFNAME on HOST_1 names a missing interface.",
               root_causes=[{"category": "network_config", "card": IFNAME_CARD,
                             "confidence": 0.7}],
               citations=[IFNAME_CARD],
               probes=[{"node": "HOST_1", "preset": "quick", "reason": "check bandwidth"}]),
    ]


PROBE_OK = ToolResult(tool="probe", status="success", invocation="probe", data={"ok": 1})


def _nodes_settings(srv, tmp_path: Path, **kw):
    """gpu-node-7 is HOST_1 for the model: inventory names are learned first."""
    return settings_for(srv, nodes_file=inventory(tmp_path, "gpu-node-7", "gpu-node-8"), **kw)


def test_node_tools_redacted_and_probe_confirmed(llm, tmp_path: Path):
    nodes = RecordedNodes({"env": ENV, "probe": PROBE_OK})
    srv = llm(*_probe_script())
    asked: list[ProbeProposal] = []

    def confirm(proposal: ProbeProposal) -> bool:
        asked.append(proposal)
        return True

    out = respond(f"is gpu-node-7 misconfigured? {QUESTION}", settings=_nodes_settings(
        srv, tmp_path), nodes=nodes, confirm_probe=confirm)
    assert nodes.calls[0] == ("gpu-node-7", "env", {"import_torch": False})  # name restored
    assert [p.key for p in asked] == [("gpu-node-7", "quick")]
    assert nodes.calls[-1][:2] == ("gpu-node-7", "probe")
    assert out["probe_results"][0]["result"]["data"] == {"ok": 1}
    # The hybrid search found the card, so the answer is grounded (not the fallback).
    found = tool_messages(srv.requests[1])[1]
    assert IFNAME_CARD in [c["card"] for c in found["data"]["cards"]]
    assert out["llm"]["used"] and out["diagnosis"]["root_causes"][0]["card"] == IFNAME_CARD
    results = tool_messages(srv.requests[2])
    assert [r["status"] for r in results][-2:] == ["success", "error"]  # unknown preset
    assert out["suggested_probes"][0]["node"] == "gpu-node-7"
    assert out["suggested_probes"][0]["status"] == "confirmed"
    assert "gpu-node-7" in out["explanation"]
    assert_no_secrets(srv, log=False)
    assert "gpu-node-7" not in srv.all_text()


def test_probe_never_runs_without_confirmation(llm, tmp_path: Path):
    nodes = RecordedNodes({"env": ENV, "probe": PROBE_OK})
    srv = llm(*_probe_script())
    out = respond("is gpu-node-7 misconfigured?", settings=_nodes_settings(srv, tmp_path),
                  nodes=nodes)
    assert out["llm"]["used"]
    assert [c[1] for c in nodes.calls] == ["env"]
    assert out["suggested_probes"][0]["needs_confirmation"] is True
    assert not out["probe_results"]
    srv2 = llm(*_probe_script())
    asked: list[ProbeProposal] = []
    out = respond("is gpu-node-7 misconfigured?", settings=_nodes_settings(srv2, tmp_path),
                  nodes=nodes, confirm_probe=lambda p: asked.append(p) is not None)
    assert len(asked) == 1 and out["suggested_probes"][0]["status"] == "declined"
    assert "probe" not in [c[1] for c in nodes.calls]
    assert_no_secrets(srv2, log=False)


def test_probe_only_in_the_final_answer_can_still_be_confirmed(llm, tmp_path: Path):
    nodes = RecordedNodes({"env": ENV, "probe": PROBE_OK})
    srv = llm(_probe_script()[0], _probe_script()[2])  # no propose_probe call at all
    asked: list[ProbeProposal] = []
    out = respond("is gpu-node-7 misconfigured?", settings=_nodes_settings(srv, tmp_path),
                  nodes=nodes, confirm_probe=lambda p: asked.append(p) is None)
    assert [p.key for p in asked] == [("gpu-node-7", "quick")]
    assert asked[0].params["collectives"] == ["all_reduce"]
    assert nodes.calls[-1][:2] == ("gpu-node-7", "probe")
    assert out["probe_results"][0]["preset"] == "quick"
    assert_no_secrets(srv, log=False)


def test_probes_on_nodes_outside_the_inventory_are_refused(llm, tmp_path: Path):
    nodes = RecordedNodes({"env": ENV, "probe": PROBE_OK})
    srv = llm({"tool_calls": [("search_knowledge", {"query": "NCCL_SOCKET_IFNAME"}),
                              ("propose_probe", {"node": "gpu-node-77", "preset": "quick"})]},
              answer(explanation="x", citations=[IFNAME_CARD],
                     probes=[{"node": "gpu-node-77", "preset": "quick"},
                             {"node": "HOST_2", "preset": "quick"}]))
    asked: list[ProbeProposal] = []
    out = respond("probe it", settings=_nodes_settings(srv, tmp_path), nodes=nodes,
                  confirm_probe=lambda p: asked.append(p) is not None)
    result = tool_messages(srv.requests[1])[1]
    assert result["status"] == "error" and result["invocation"].startswith("propose_probe(")
    assert "unknown node" in result["error"] and "Did you mean" in result["error"]
    assert "HOST_1" in result["error"]  # gpu-node-7, as the model knows it
    # the tools of one step run in threads: find the call by name, not by its place
    error = next(t for t in out["llm"]["tools"] if t["tool"] == "propose_probe")["error"]
    assert "gpu-node-7" in error and "gpu-node-8" in error  # restored for the user
    assert any("dropped probe suggestion 'quick' on gpu-node-77: not a node of the inventory"
               in n for n in out["notes"])
    # gpu-node-8 (HOST_2) is in the inventory: that suggestion stands, and was asked about.
    assert [p.key for p in asked] == [("gpu-node-8", "quick")]


def test_no_inventory_means_no_probe(llm):
    srv = llm({"tool_calls": [("propose_probe", {"node": "gpu-node-7", "preset": "quick"})]},
              answer(explanation="x", citations=[OOM_CARD]))
    out = respond("probe gpu-node-7", settings=settings_for(srv), nodes=RecordedNodes())
    result = tool_messages(srv.requests[1])[0]
    assert result["status"] == "error" and "no node inventory configured" in result["error"]
    assert "NCCLBOT_NODES_FILE" in result["error"]
    assert "suggested_probes" not in out or out["suggested_probes"] == []


def test_unknown_node_is_a_tool_error(llm, tmp_path: Path):
    srv = llm({"tool_calls": [("node_topology", {"node": "nope"})]},
              answer(explanation="see card", citations=[OOM_CARD]))
    out = respond("topology of nope?", settings=settings_for(srv), nodes=RecordedNodes())
    result = tool_messages(srv.requests[1])[0]
    assert result["status"] == "error" and "unknown node 'HOST_1'" in result["error"]
    assert any("no tool returned it" in n for n in out["notes"])  # OOM card never retrieved


# -- SQLite conversation store ---------------------------------------------------------------
def test_sqlite_store_round_trips_and_survives_a_restart(tmp_path: Path):
    db = tmp_path / "state" / "ncclbot.sqlite3"
    s = ThreadState(thread_id="C1:123", attachments={"a.log": "/tmp/a.log"},
                    seen_cards=[OOM_CARD], placeholders={"HOST_1": "node-a"},
                    log_files={"a.log": ["a.log"]}, turns=[Turn(question="q", explanation="e")])
    store = SqliteThreadStore(db)
    assert store.get("C1:123") is None
    store.put(s)
    store.put(ThreadState())  # no thread id: not kept
    assert store.get("C1:123") == s and len(store) == 1
    store.close()
    reopened = SqliteThreadStore(db)  # a restart
    assert reopened.get("C1:123") == s
    s.turns.append(Turn(question="q2"))
    reopened.put(s)
    assert reopened.get("C1:123").turns[-1].question == "q2" and len(reopened) == 1


def test_sqlite_store_is_bounded_and_tolerates_a_bad_row(tmp_path: Path):
    store = SqliteThreadStore(tmp_path / "s.db", max_threads=2)
    for i in range(4):
        store.put(ThreadState(thread_id=f"t{i}"))
    assert len(store) == 2 and store.get("t0") is None and store.get("t3") is not None
    with store.db.tx() as tx:
        tx.execute("UPDATE thread_state SET state='{not json' WHERE thread_id='t3'")
    assert store.get("t3") is None  # logged and started afresh, not a crash


def test_sqlite_store_is_thread_safe(tmp_path: Path):
    store = SqliteThreadStore(tmp_path / "s.db")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(25):
                tid = f"w{n}-{i % 5}"
                state = store.get(tid) or ThreadState(thread_id=tid)
                state.turns.append(Turn(question=str(i)))
                store.put(state)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(store) == 40
    assert all(len(store.get(f"w{n}-{k}").turns) == 5 for n in range(8) for k in range(5))


def test_follow_up_after_a_restart_uses_the_sqlite_state(llm, crash_log: Path, tmp_path: Path):
    db = tmp_path / "agent.sqlite3"
    srv = llm({"tool_calls": [("analyze_log", {"attachment": "train.log"}),
                              ("search_knowledge", {"query": "CUDA OOM"})]},
              grounded_final)
    respond("What happened?", [crash_log], thread_id="C9:1", settings=settings_for(srv),
            store=SqliteThreadStore(db))
    rc = analysis(srv.requests[1])["root_causes"][0]
    srv.script.append(answer(explanation="Lower the batch size.",
                             root_causes=[{"category": "rank_crashed", "card": OOM_CARD,
                                           "confidence": 0.7, "evidence": rc["evidence"][:1]}],
                             citations=[OOM_CARD]))
    out = respond("And now?", thread_id="C9:1", settings=settings_for(srv),
                  store=SqliteThreadStore(db))  # a new process, the same file
    assert out["llm"]["used"] and out["llm"]["tools"] == [] and out["notes"] == []
    assert out["diagnosis"]["root_causes"][0]["evidence"]
    assert "What happened?" in str(srv.requests[-1])
    assert_no_secrets(srv)
