"""A confirmed probe longer than 30 s, through the LLM agent's path (`ClientNodeBackend` ->
`NodeRunner`) against a real agent process: the bot waits as long as the probe's own
timeout, not the node client's 30 s default (issue 28: it gave up after 30.2 s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.agent.conftest import SECRET, faulty, start_agent, stop_agent
from tests.agent_llm.conftest import answer, settings_for
from tests.answer_json import respond
from tools.registry import TOOLS

IFNAME_CARD = "nccl-socket-ifname-matches-no-interface"
#: rank 1 sleeps 2 s before each timed iteration: the gloo preset's 6 sizes x 3 iterations
#: make the sweep last 36 s or more
SLOW = "delay:rank=1:seconds=2"


def test_a_confirmed_probe_of_35_s_returns_its_result(llm, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    preset = TOOLS["probe"].presets["gloo"]
    assert len(preset["collectives"]) * preset["iters"] * 6 * 2 >= 35  # the sweep's floor
    agent = start_agent(tmp_path, "gpu-node-7", env=faulty(SLOW))
    try:
        nodes = tmp_path / "nodes.yaml"
        nodes.write_text(yaml.safe_dump({"nodes": {"gpu-node-7": {"url": agent.url}}}))
        srv = llm(
            {"tool_calls": [("search_knowledge", {"query": "NCCL_SOCKET_IFNAME no interface"}),
                            ("propose_probe", {"node": "HOST_1", "preset": "gloo"})]},
            answer(explanation="HOST_1 may have a slow link; a probe will tell.",
                   root_causes=[{"category": "network_config", "card": IFNAME_CARD,
                                 "confidence": 0.6}],
                   citations=[IFNAME_CARD],
                   probes=[{"node": "HOST_1", "preset": "gloo", "reason": "measure it"}]))
        settings = settings_for(srv, nodes_file=nodes, agent_secret=SECRET)
        out = respond("is gpu-node-7 slow?", settings=settings,
                      confirm_probe=lambda proposal: proposal.preset == "gloo")
    finally:
        stop_agent(agent)
    assert out["llm"]["used"], out["notes"]
    (run,) = out["probe_results"]
    result = run["result"]
    assert (run["node"], run["preset"]) == ("gpu-node-7", "gloo")
    assert result["status"] == "success", result["error"]
    rows = result["data"]["results"]
    assert len(rows) == 6 and all(r["correct"] for r in rows)
    # every timed iteration waited for the slow rank: the probe really ran past 30 s
    assert sum(r["time_us"] * preset["iters"] for r in rows) / 1e6 >= 35
    audit = [json.loads(line) for line in agent.audit_lines()]
    probe = [a for a in audit if a["path"] == "/v1/probe"]
    assert [a.get("outcome") for a in probe] == ["success"]
