"""`NodeRunner`, the one way the bot runs a node tool: the wait comes from the tool's spec,
progress comes from the agent while a probe runs, and a caller can stop waiting. A real
agent app on loopback; its probe runner is a test seam that waits on events (no sleeps)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.errors import NodeError
from bot.nodes.runner import MARGIN_S, NodeRunner
from tests.agent.conftest import serve_inprocess, use_inventory
from tools.params import ProbeProgress
from tools.result import ToolResult

WHERE = ProbeProgress(step=2, steps=6, collective="all_reduce", bytes=4096, ranks=2)


def test_the_wait_is_the_tools_own_limit() -> None:
    runner = NodeRunner()
    assert runner.timeout("probe", {"timeout": 120.0}) == 120.0 + MARGIN_S
    assert runner.timeout("probe", {"backend": "gloo", "force": True, "timeout": 900}) == \
        900 + MARGIN_S  # the agent's request model: force is one of its fields
    assert runner.timeout("hang", {"deadline_s": 20}) == 20 + 15 + MARGIN_S
    assert runner.timeout("probe", {"iters": -1}) == 600 + MARGIN_S  # refused at once anyway
    with pytest.raises(NodeError, match="unknown diagnostic"):
        runner.run("n1", "nope")


class SlowProbe:
    """A probe that reports a position, then waits until the test lets it finish."""

    def __init__(self) -> None:
        self.finish = threading.Event()

    def __call__(self, tool: str, params: dict[str, Any], on_progress: Any = None
                 ) -> ToolResult:
        if on_progress is not None:
            on_progress(WHERE)
        self.finish.wait(60)
        return ToolResult(tool=tool, status="success", invocation="slow probe",
                          data={"results": []})


def test_progress_while_it_runs_and_cancel(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    probe = SlowProbe()
    with serve_inprocess(tmp_path, run_tool=probe, gpu_processes=list) as agent:
        use_inventory(tmp_path, {"n1": agent}, monkeypatch)
        runner = NodeRunner(Settings(), "cli:tester", progress_every_s=0.1)
        seen: list[ProbeProgress] = []

        def heard(where: ProbeProgress) -> None:
            seen.append(where)
            probe.finish.set()  # the caller has seen where it is: let it finish

        result = runner.run("n1", "probe", {"backend": "gloo"}, on_progress=heard)
        assert result.status == "success" and result.invocation == "slow probe"
        assert seen and seen[0] == WHERE

        probe.finish.clear()
        cancel = threading.Event()
        try:
            with pytest.raises(NodeError, match="cancelled while waiting for node n1"):
                runner.run("n1", "probe", {"backend": "gloo"},
                           on_progress=lambda where: cancel.set(), cancel=cancel)
        finally:
            probe.finish.set()
