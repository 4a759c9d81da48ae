"""The model's door, end to end: every planted secret shape (the whole corpus, every
fragment of a pass phrase or token) is gone from every request the scripted model server
receives, whether it came in the question, an attached log or a node tool's output (an
environment dump, a hang sample's command lines, a JSON payload)."""

from __future__ import annotations

from pathlib import Path

from bot.agent import respond
from tests.agent_llm.conftest import (
    RecordedNodes,
    answer,
    inventory,
    settings_for,
)
from tests.test_redaction_corpus import PLANTED, leaked
from tools.result import ToolResult

LINES = [p["line"] for p in PLANTED]
IFNAME_CARD = "nccl-socket-ifname-matches-no-interface"


def _env_with_the_corpus() -> ToolResult:
    """A node's environment result carrying every planted line: as variables, as an env
    dump's text, as command lines and as JSON inside strings."""
    env = {f"VAR_{i}": line for i, line in enumerate(LINES)}
    env.update({"NCCL_IB_PWD": "IbPwdEnvDump77", "NCCL_SOCKET_IFNAME": "eth9"})
    return ToolResult(tool="env", status="success", invocation="env {}",
                      data={"env": env, "dump": "\n".join(LINES),
                            "ranks": [{"rank": i, "cmdline": line}
                                      for i, line in enumerate(LINES)]})


def test_no_planted_shape_reaches_the_model(llm, tmp_path: Path, crash_log: Path) -> None:
    log = tmp_path / "secrets.log"
    log.write_text("\n".join(LINES) + "\n" + crash_log.read_text(encoding="utf-8"),
                   encoding="utf-8")
    nodes = RecordedNodes({"env": _env_with_the_corpus()})
    srv = llm({"tool_calls": [("analyze_log", {"attachment": "secrets.log"}),
                              ("node_env", {"node": "HOST_1"})]},
              answer(explanation="x", citations=[IFNAME_CARD]))
    question = "Why did it fail? Here is everything:\n" + "\n".join(LINES)
    respond(question, [log], settings=settings_for(
        srv, nodes_file=inventory(tmp_path, "gpu-node-7")), nodes=nodes)
    assert len(srv.requests) == 2, "the model saw the tool outputs"
    assert [c[1] for c in nodes.calls] == ["env"]
    text = srv.all_text()
    assert text.count("[REDACTED]") >= len(LINES)
    assert leaked(text) == []
