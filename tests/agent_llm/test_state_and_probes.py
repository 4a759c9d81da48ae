"""Thread state round-trips through JSON; probes are proposed, and run only when confirmed."""

from __future__ import annotations

from pathlib import Path

from bot.agent import respond
from bot.agent.state import InMemoryConversationStore, ThreadState, Turn
from tests.agent_llm.conftest import (
    OOM_CARD,
    PLANTED,
    RecordedNodes,
    answer,
    assert_no_secrets,
    settings_for,
)
from tests.agent_llm.llm_server import tool_messages
from tools.result import Finding, ToolResult


def test_state_round_trips_through_json():
    s = ThreadState(thread_id="C1:123", attachments={"a.log": "/tmp/a.log"},
                    seen_cards=[OOM_CARD], placeholders={"HOST_1": "node-a"},
                    turns=[Turn(question="q", explanation="e")])
    assert ThreadState.model_validate_json(s.model_dump_json()) == s
    store = InMemoryConversationStore(max_threads=1)
    store.put(s)
    assert store.get("C1:123") == s
    store.put(ThreadState(thread_id="other"))
    assert store.get("C1:123") is None  # bounded


ENV = ToolResult(tool="env", status="success", invocation="env {}",
                 data={"env": {"NCCL_SOCKET_IFNAME": "eth9", "HF_TOKEN": PLANTED["hf"],
                               "NCCL_DEBUG": "INFO"},
                       "hostname": "gpu-node-7.cluster.local",
                       "cmdline": f"python train.py --password={PLANTED['password']}"},
                 findings=[Finding(severity="warn", rule="ifname-missing",
                                   message="NCCL_SOCKET_IFNAME=eth9 matches no interface")])


def _probe_script() -> list:
    return [
        {"tool_calls": [("node_env", {"node": "HOST_1"}),
                        ("search_knowledge", {"query": "NCCL_SOCKET_IFNAME no interface"})]},
        {"tool_calls": [("propose_probe", {"node": "HOST_1", "preset": "quick"}),
                        ("propose_probe", {"node": "HOST_1", "preset": "rm-rf"})]},
        answer(explanation="NCCL_SOCKET_IFNAME on HOST_1 names a missing interface.",
               root_causes=[{"category": "network_config",
                             "card": "nccl-socket-ifname-matches-no-interface",
                             "confidence": 0.7}],
               citations=["nccl-socket-ifname-matches-no-interface"],
               probes=[{"node": "HOST_1", "preset": "quick", "reason": "check bandwidth"}]),
    ]


def test_node_tools_redacted_and_probe_confirmed(llm):
    nodes = RecordedNodes({"env": ENV, "probe": ToolResult(tool="probe", status="success",
                                                           invocation="probe", data={"ok": 1})})
    srv = llm(*_probe_script())
    asked: list[dict] = []

    def confirm(proposal: dict) -> bool:
        asked.append(proposal)
        return True

    out = respond("is gpu-node-7 misconfigured?", settings=settings_for(srv), nodes=nodes,
                  confirm_probe=confirm)
    assert nodes.calls[0] == ("gpu-node-7", "env", {"import_torch": False})  # name restored
    assert [(p["node"], p["preset"]) for p in asked] == [("gpu-node-7", "quick")]
    assert nodes.calls[-1][:2] == ("gpu-node-7", "probe")
    assert out["probe_results"][0]["result"]["data"] == {"ok": 1}
    results = tool_messages(srv.requests[2])
    assert [r["status"] for r in results][-2:] == ["success", "error"]  # unknown preset
    assert out["suggested_probes"][0]["node"] == "gpu-node-7"
    assert "gpu-node-7" in out["explanation"]
    assert_no_secrets(srv, hosts=False)
    assert "gpu-node-7" not in srv.all_text()


def test_probe_never_runs_without_confirmation(llm):
    nodes = RecordedNodes({"env": ENV})
    srv = llm(*_probe_script())
    out = respond("is gpu-node-7 misconfigured?", settings=settings_for(srv), nodes=nodes)
    assert [c[1] for c in nodes.calls] == ["env"]
    assert out["suggested_probes"][0]["needs_confirmation"] is True
    assert "probe_results" not in out
    srv2 = llm(*_probe_script())
    respond("is gpu-node-7 misconfigured?", settings=settings_for(srv2), nodes=nodes,
            confirm_probe=lambda p: False)
    assert "probe" not in [c[1] for c in nodes.calls]


def test_unknown_node_is_a_tool_error(llm, tmp_path: Path):
    srv = llm({"tool_calls": [("node_topology", {"node": "nope"})]},
              answer(explanation="see card", citations=[OOM_CARD]))
    out = respond("topology of nope?", settings=settings_for(srv), nodes=RecordedNodes())
    result = tool_messages(srv.requests[1])[0]
    assert result["status"] == "error" and "unknown node 'HOST_1'" in result["error"]
    assert any("no tool returned it" in n for n in out["notes"])  # OOM card never retrieved
