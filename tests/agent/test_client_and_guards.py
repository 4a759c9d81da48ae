"""The bot's client against real local agents: clear NodeErrors; GPU-busy refusal and force."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import NodeError
from bot.nodes.client import NodeClient
from bot.nodes.inventory import Node, parse_inventory
from tests.agent.conftest import LOOPBACK, Agent, free_port, use_inventory
from tools.result import ToolResult


def _fake_run(tool: str, params: dict, **_: object) -> ToolResult:
    return ToolResult(tool=tool, status="success", invocation=f"fake {tool}", data=params)


def _busy() -> list[dict]:
    return [{"gpu": 0, "pid": 4242, "used_mib": 70000}]


def test_unreachable_agent_is_a_clear_error() -> None:
    node = Node(name="gpu-node-9", url=f"http://{LOOPBACK}:{free_port()}")
    with NodeClient(node, b"x" * 32, "cli:t", retries=1, backoff_s=0.01) as c, \
            pytest.raises(NodeError) as err:
        c.run("env", {})
    assert "gpu-node-9" in err.value.message and "unreachable" in err.value.message
    assert "serve agent" in (err.value.hint or "")


def test_bad_secret_is_an_auth_error(agent: Agent) -> None:
    with agent.client(secret="not-the-secret-0123456789") as c, pytest.raises(NodeError) as err:
        c.run("env", {"import_torch": False})
    assert "refused authentication" in err.value.message
    assert "NCCLBOT_AGENT_SECRET" in (err.value.hint or "")


def test_out_of_bounds_via_client(agent: Agent) -> None:
    with agent.client() as c, pytest.raises(NodeError) as err:
        c.run("probe", {"backend": "gloo", "max_bytes": -5})
    assert "rejected the request" in err.value.message and "max_bytes" in err.value.message


def test_unknown_node_suggests_close_matches() -> None:
    inv = parse_inventory("""
nodes:
  gpu-node-17: {url: "https://10.0.0.17:8470", labels: [rack-3]}
  gpu-node-18: {url: "https://10.0.0.18:8470", labels: [rack-3]}
groups:
  pair: [gpu-node-17, gpu-node-18]
""")
    with pytest.raises(NodeError) as err:
        inv.get("gpu-node-71")
    assert "unknown node 'gpu-node-71'" in err.value.message
    assert "gpu-node-17" in (err.value.hint or "")
    assert [n.name for n in inv.expand(["rack-3"])] == ["gpu-node-17", "gpu-node-18"]
    assert [n.name for n in inv.expand(["pair", "gpu-node-17"])] == ["gpu-node-17", "gpu-node-18"]


@pytest.mark.parametrize("inprocess_agent", [{"gpu_processes": _busy, "run_tool": _fake_run,
                                              "force_users": ["slack:ONCALL"]}], indirect=True)
def test_probe_refuses_busy_gpus_unless_forced_by_allowed_user(inprocess_agent: Agent) -> None:
    with inprocess_agent.client(user="slack:U1") as c:
        with pytest.raises(NodeError) as err:
            c.run("probe", {"backend": "gloo"})
        assert "busy" in err.value.message and "4242" in err.value.message
        with pytest.raises(NodeError) as err:
            c.run("probe", {"backend": "gloo", "force": True})
        assert "may not force" in err.value.message
    with inprocess_agent.client(user="slack:ONCALL") as c:
        assert c.run("probe", {"backend": "gloo", "force": True}).status == "success"


def test_cli_unknown_node_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from bot.cli.main import app

    inv = tmp_path / "nodes.yaml"
    inv.write_text('nodes: {gpu-node-17: {url: "http://127.0.0.1:9"}}\n')
    monkeypatch.setenv("NCCLBOT_NODES_FILE", str(inv))
    monkeypatch.setenv("NCCLBOT_AGENT_SECRET", "s" * 32)
    result = CliRunner().invoke(app, ["node", "env", "--node", "gpu-node-71"])
    assert isinstance(result.exception, NodeError)
    assert "gpu-node-17" in str(result.exception)


def test_cli_node_env_goes_through_the_agent(agent: Agent, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    from bot.cli.main import app

    use_inventory(tmp_path, {"node-a": agent}, monkeypatch)
    before = len(agent.audit_lines())
    result = CliRunner().invoke(app, ["node", "env", "--node", "node-a", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["tool"] == "env" and out["data"]["node"] == "node-a"
    last = json.loads(agent.audit_lines()[-1])
    assert len(agent.audit_lines()) == before + 1 and last["user"].startswith("cli:")


def _hostile_result(tool: str, params: dict) -> ToolResult:
    from tools.result import Finding

    return ToolResult(tool=tool, status="error", invocation=f"{tool} [/inv]",
                      error="agent says [/x] [bold]no[/bold]",
                      findings=[Finding(severity="warn", rule="r", message="[/evil] value")])


@pytest.mark.parametrize("inprocess_agent", [{"run_tool": _hostile_result}], indirect=True)
def test_cli_renders_remote_results_as_text(inprocess_agent: Agent, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from bot.cli.main import app

    use_inventory(tmp_path, {"node-x": inprocess_agent}, monkeypatch)
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["node", "env", "--node", "node-x"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "agent says [/x] [bold]no[/bold]" in result.output
    assert "[/evil] value" in result.output and "env [/inv]" in result.output
