"""`libs`: the libraries a running job's ranks loaded, declared once (see
`tools.params.ToolSpec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.hang.procs import RankSelection
from tools.params import LlmTool, McpTool, RunContext, ToolSpec
from tools.result import ToolResult

if TYPE_CHECKING:
    from rich.console import Console


class LibsParams(RankSelection):
    """The ranks whose loaded libraries are read."""


def run(p: LibsParams, ctx: RunContext) -> ToolResult:
    from tools.libs.collect import collect_libs

    return collect_libs(p.pids, p.pattern, p.job)


def summary(result: ToolResult) -> str:
    if result.error:
        return result.error[:300]
    versions = result.data.get("versions") or {}
    text = ", ".join(f"{family} {'/'.join(vs)}" for family, vs in versions.items())
    head = f"{len(result.data.get('ranks') or [])} rank(s): {text or 'no GPU-stack library'}"
    return head + (f"; {result.findings[0].message}" if result.findings else "")


def render(result: ToolResult, con: Console) -> None:
    """One row per rank: the version of each library family it mapped."""
    from rich.markup import escape
    from rich.table import Table

    ranks = result.data.get("ranks") or []
    families = list(result.data.get("versions") or {})
    if not ranks:
        return
    t = Table("rank", "pid", *map(escape, families), title="libraries loaded")
    for r in ranks:
        t.add_row(escape(str(r["rank"])), str(r["pid"]),
                  *[escape("/".join(r["versions"].get(f, [])) or "-") for f in families])
    con.print(t)


SPEC = ToolSpec(
    "libs",
    "The NCCL, CUDA runtime/driver, cuBLAS, cuDNN, NVRTC, torch and OpenMP libraries a "
    "running job's ranks on this node actually loaded (from /proc/PID/maps: versioned file "
    "names, or the pip wheel they came in), with findings when one rank mapped two copies "
    "or ranks of one job disagree. Use when a version mismatch is suspected (undefined "
    "symbols, NCCL built for another CUDA, ranks behaving differently).",
    LibsParams, run,
    prerequisites=("permission to read the ranks' /proc/PID/maps (the same user, or root)",),
    timeout=lambda p: 30.0, summary=summary, render=render,
    llm=LlmTool("node_libs", fields=("job",)),
    mcp=McpTool("node_libs", fields=("pids", "pattern", "job")),
    title="the NCCL/CUDA/cuDNN/torch library versions a running job's ranks loaded",
)
