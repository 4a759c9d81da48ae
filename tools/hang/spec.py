"""`hang`: a running job's stuck ranks sampled on this node, declared once (see
`tools.params.ToolSpec`). The bot's `ncclbot node hang` compares several nodes' samples."""

from __future__ import annotations

from tools.hang.collect import HangParams
from tools.hang.model import HangSample
from tools.params import McpTool, RunContext, ToolSpec
from tools.result import ToolResult


def run(p: HangParams, ctx: RunContext) -> ToolResult:
    from tools.hang.collect import collect_hang

    return collect_hang(p)


def summary(result: ToolResult) -> str:
    if result.error:
        return result.error[:300]
    ranks = result.data.get("ranks") or []
    return f"{len(ranks)} rank(s) sampled" + (f"; {len(result.findings)} finding(s)"
                                              if result.findings else "")


SPEC = ToolSpec(
    "hang",
    "For a hanging job's ranks on this node: each rank's Python stack (py-spy), a "
    "Flight Recorder dump through its debug pipe, NCCL RAS (two polls: which ranks "
    "launched how many collectives, which are missing or dead), a GPU sample and "
    "recent Xid lines. Use when a job is stuck now; the bot compares the nodes and "
    "names the odd rank out.",
    HangParams, run,
    prerequisites=("py-spy and permission to ptrace the ranks (root or CAP_SYS_PTRACE)",
                   "NCCL RAS (NCCL >= 2.24) for RAS", "NVML for the GPU sample"),
    oncall=True, oncall_why="read the ranks' stacks", single_flight=True,
    # the sample's own deadline, which it keeps; a little more to build the reply
    timeout=lambda p: float(p.deadline_s) + 15.0,
    summary=summary, cli=False, result=HangSample, slack_args="NODE,NODE|GROUP",
    mcp=McpTool("node_hang", fields=("pids", "pattern", "job")),
    title="why a running job is stuck: every rank's stack, Flight Recorder and NCCL RAS "
          "on those nodes, compared",
)
