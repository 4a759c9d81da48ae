"""Node diagnostics through MCP: the real node agent as a process, reached with the signed
node client as the server's user; read-only by default, probes only for an on-call user the
server was started for; every call in the agent's and the bot's audit trail."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from bot.config import Settings
from bot.slack.store import Store
from tests.agent.conftest import SECRET, Agent, start_agent, stop_agent
from tests.mcp.conftest import ROOT, ncclbot_argv, run_stdio, server_env, structured
from tools.registry import TOOLS


@pytest.fixture(scope="module")
def node_a(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Agent, Path]]:
    tmp = tmp_path_factory.mktemp("mcp-agent")
    agent = start_agent(tmp, "node-a")
    inventory = tmp / "nodes.yaml"
    inventory.write_text(f'nodes:\n  node-a: {{url: "{agent.url}"}}\n')
    yield agent, inventory
    stop_agent(agent)


def nodes_env(data_dir: Path, inventory: Path, **extra: str) -> dict[str, str]:
    return server_env(data_dir, NCCLBOT_NODES_FILE=str(inventory), NCCLBOT_AGENT_SECRET=SECRET,
                      **extra)


def audit_of(data_dir: Path, user: str) -> list[tuple[str, str, str]]:
    store = Store.open(Settings(data_dir=data_dir))
    try:
        return [(r["node"], r["tool"], r["outcome"]) for r in store.audit_rows()
                if r["user"] == user and r["channel"] == "mcp"]
    finally:
        store.close()


def test_read_only_diagnostics_through_the_signed_agent(
        data_dir: Path, node_a: tuple[Agent, Path]) -> None:
    agent, inventory = node_a

    async def steps(s: ClientSession) -> tuple[dict[str, Any], ...]:
        env = structured(await s.call_tool("node_env", {"node": "node-a"}))
        # the node's name comes back as a placeholder; passed back, it reaches the same node
        again = structured(await s.call_tool("node_xid", {"node": env["data"]["node"]}))
        probe = await s.call_tool("node_probe", {"node": "node-a", "preset": "gloo"})
        hang = structured(await s.call_tool("node_hang", {"nodes": ["node-a"],
                                                          "pattern": "no-such-job-here"}))
        return env, again, {"is_error": probe.is_error, "text": probe.content[0].text}, hang

    env, again, probe, hang = run_stdio(nodes_env(data_dir, inventory), steps, "--user", "erin")
    # the agent's own rule holds through MCP: only its on-call users read the ranks' stacks
    assert hang["verdict"] == "error" and "may not read the ranks' stacks" in hang["text"]
    assert env["tool"] == "env" and env["status"] == "success", env
    assert env["data"]["node"] != "node-a"  # a host name is a placeholder for the agent's LLM
    assert again["tool"] == "xid" and again["data"]["node"] == env["data"]["node"]
    assert probe["is_error"] and "node_probe" in probe["text"]  # not offered at all
    signed = [json.loads(line) for line in agent.audit_lines()]
    assert {(e["user"], e["tool"]) for e in signed if e["user"] == "mcp:erin"} >= {
        ("mcp:erin", "env"), ("mcp:erin", "xid")}
    assert ("node-a", "env", "success") in audit_of(data_dir, "mcp:erin")
    assert ("node-a", "xid", "started") in audit_of(data_dir, "mcp:erin")
    assert ("node-a", "hang", "error") in audit_of(data_dir, "mcp:erin")


def test_probes_need_the_flag_and_an_on_call_user(data_dir: Path,
                                                  node_a: tuple[Agent, Path]) -> None:
    agent, inventory = node_a
    base = [*ncclbot_argv(), "serve", "mcp", "--allow-probes"]
    oncall = nodes_env(data_dir, inventory, NCCLBOT_ONCALL_USERS="alice")
    for args, words in (([], "needs an on-call identity: --user NAME"),
                        (["--user", "bob"], "'bob' is not on call")):
        proc = subprocess.run([*base, *args], env=oncall, cwd=ROOT, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode != 0 and words in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    pytest.importorskip("torch")  # the gloo sweep below really runs

    async def steps(s: ClientSession) -> tuple[Any, dict[str, Any]]:
        tools = await s.list_tools()
        return tools, structured(await s.call_tool("node_probe", {"node": "node-a",
                                                                  "preset": "gloo"}))

    tools, result = run_stdio(oncall, steps, "--allow-probes", "--user", "alice")
    probe = next(t for t in tools.tools if t.name == "node_probe")
    assert probe.input_schema["properties"]["preset"]["enum"] == list(TOOLS["probe"].presets)
    assert probe.input_schema["properties"]["preset"]["enum"][:2] == ["quick", "allreduce"]
    assert probe.input_schema["required"] == ["preset"]
    assert probe.annotations is not None and probe.annotations.read_only_hint is False
    assert result["tool"] == "probe" and result["status"] == "success", result
    assert result["data"]["results"], "the gloo sweep measured something"
    signed = [json.loads(line) for line in agent.audit_lines()]
    assert any(e["user"] == "mcp:alice" and e["tool"] == "probe" for e in signed)
    assert ("node-a", "probe", "success") in audit_of(data_dir, "mcp:alice")
