"""A busy node is reported as busy (and stops a multi-node probe before it starts), --force
is forwarded and authorised by the agent, and the agent ignores the test-only fault hook
unless it is explicitly allowed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.errors import NodeError
from bot.nodes.client import cli_user
from tests.agent.conftest import Agent, serve_inprocess, use_inventory
from tools.agent.app import injected_fault
from tools.result import ToolResult

runner = CliRunner()


def _fake_run(tool: str, params: dict, **_: object) -> ToolResult:
    return ToolResult(tool=tool, status="success", invocation=f"fake {tool}", data=params)


def _busy() -> list[dict]:
    return [{"gpu": 0, "pid": 4242, "used_mib": 70000}]


@pytest.fixture
def trio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Agent]]:
    """node-a and node-b idle, node-c with a training job on its GPUs."""
    with ExitStack() as stack:
        agents = {n: stack.enter_context(serve_inprocess(
            tmp_path, n, gpu_processes=_busy if n == "node-c" else list,
            run_tool=_fake_run, force_users=[cli_user()])) for n in ("node-a", "node-b", "node-c")}
        use_inventory(tmp_path, agents, monkeypatch)
        yield agents


def test_multinode_probe_stops_before_starting_and_names_the_busy_node(
        trio: dict[str, Agent]) -> None:
    result = runner.invoke(app, ["node", "probe", "--nodes", "node-a,node-b,node-c",
                                 "--backend", "gloo", "--nproc", "1"])
    assert isinstance(result.exception, NodeError), result.output
    message = str(result.exception)
    assert "busy node(s) node-c" in message and "4242" in message
    assert "node-a (" not in message and "node-b (" not in message
    assert "A busy node is not a bad node" in message
    for agent in trio.values():  # nothing was probed anywhere
        paths = [json.loads(x)["path"] for x in agent.audit_lines()]
        assert "/v1/probe" not in paths and "/v1/probe/check" in paths


def test_force_is_forwarded_and_authorised_by_the_agent(trio: dict[str, Agent],
                                                        tmp_path: Path) -> None:
    args = ["node", "probe", "--node", "node-c", "--backend", "gloo", "--json"]
    busy = runner.invoke(app, args)
    assert isinstance(busy.exception, NodeError) and "node node-c is busy" in str(busy.exception)
    forced = runner.invoke(app, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.output)["invocation"] == "fake probe"
    with serve_inprocess(tmp_path, "strict", gpu_processes=_busy, run_tool=_fake_run,
                         force_users=[]) as strict:
        with strict.client(user=cli_user()) as c, pytest.raises(NodeError) as err:
            c.run("probe", {"backend": "gloo", "force": True})
        assert "may not force" in err.value.message
    local = runner.invoke(app, ["node", "probe", "--backend", "gloo", "--force"])
    assert local.exit_code == 2 and "--force only applies" in local.output


def test_torchrun_options_are_local_only(trio: dict[str, Agent]) -> None:
    r = CliRunner(env={"COLUMNS": "300"}).invoke(app, [
        "node", "probe", "--node", "node-a", "--backend", "gloo", "--nnodes", "2",
        "--rdzv-endpoint", "127.0.0.1:29400"])
    # the agent's own request model says why, before anything is sent
    assert r.exit_code == 2 and "--nnodes, --rdzv-endpoint: runs torchrun" in r.output
    assert all("/v1/probe" not in line for a in trio.values() for line in a.audit_lines())


def test_fault_hook_needs_explicit_permission() -> None:
    env = {"NCCLBOT_PROBE_FAULT": "hang:collective=all_reduce"}
    assert injected_fault(env) is None
    assert injected_fault({**env, "NCCLBOT_AGENT_ALLOW_FAULTS": "yes"}) is None
    assert injected_fault({**env, "NCCLBOT_AGENT_ALLOW_FAULTS": "1"}) == env[
        "NCCLBOT_PROBE_FAULT"]
    assert injected_fault(env, allow=True) == env["NCCLBOT_PROBE_FAULT"]


def test_agent_ignores_fault_in_its_environment(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("NCCLBOT_PROBE_FAULT", "hang:collective=all_reduce")
    monkeypatch.delenv("NCCLBOT_AGENT_ALLOW_FAULTS", raising=False)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    with serve_inprocess(tmp_path, gpu_processes=list) as agent, agent.client() as c:
        result = c.run("probe", {"backend": "gloo", "nproc": 2, "min_bytes": 1024,
                                 "max_bytes": 1024, "iters": 1, "warmup": 0,
                                 "collectives": ["all_reduce"], "collective_timeout": 5,
                                 "timeout": 60})
    assert result.status == "success", result.error  # the hang was not injected
