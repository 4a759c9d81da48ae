"""`probe`: a bounded collective bandwidth sweep, declared once (see `tools.params.ToolSpec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.params import McpTool, RunContext, ToolSpec
from tools.probe.model import ProbeData
from tools.probe.params import ProbeParams
from tools.probe.presets import PROBE_PRESETS
from tools.probe.remote import ProbeRequest
from tools.probe.summary import probe_summary
from tools.result import ToolResult

if TYPE_CHECKING:
    from rich.console import Console


def run(p: ProbeParams, ctx: RunContext) -> ToolResult:
    from tools.probe.run import run_probe

    return run_probe(p, fault=ctx.fault, on_progress=ctx.progress)


def summary(result: ToolResult) -> str:
    if result.error:
        return result.error[:300]
    return probe_summary(list(result.data.get("results") or []))[0]


def render(result: ToolResult, con: Console) -> None:
    """One row per collective and size: time, algbw, busbw, correctness."""
    from rich.markup import escape
    from rich.table import Table

    d = result.data
    if not d.get("results"):
        return
    t = Table("collective", "bytes", "time (us)", "algbw GB/s", "busbw GB/s", "correct",
              title=escape(f"{d.get('backend')} x{d.get('nproc')}"))
    for r in d["results"]:
        correct = {True: "yes", False: "[bold red]NO[/]"}.get(r["correct"], "?")
        t.add_row(escape(str(r["collective"])), f"{r['bytes']:,}", f"{r['time_us']:.1f}",
                  f"{r['algbw_gbps']:.3f}", f"{r['busbw_gbps']:.3f}", correct)
    con.print(t)


SPEC = ToolSpec(
    "probe",
    "Run a bounded collective bandwidth sweep (all_reduce, all_gather, reduce_scatter, "
    "broadcast, alltoall, send/recv) across local GPUs with NCCL (or CPU with gloo), "
    "reporting algbw/busbw per size, correctness, hangs, and the share of the "
    "expected bandwidth for known hardware.",
    ProbeParams, run,
    prerequisites=("torch with the requested backend", "GPUs for backend nccl"),
    idempotent=False, exclusive=True, progress=True,
    # the probe's own limit, which it enforces on its ranks
    timeout=lambda p: float(p.timeout),
    summary=summary, render=render, request=ProbeRequest, presets=PROBE_PRESETS,
    mcp=McpTool("node_probe"), result=ProbeData,
    title='a bounded NCCL bandwidth probe (busbw per size)',
)
