"""`env`: the environment of a node, declared once (see `tools.params.ToolSpec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from tools.params import LlmTool, McpTool, Params, RunContext, ToolSpec
from tools.result import ToolResult

if TYPE_CHECKING:
    from rich.console import Console


class EnvParams(Params):
    import_torch: bool = Field(True, description="import torch to read its CUDA/NCCL versions")


def run(p: EnvParams, ctx: RunContext) -> ToolResult:
    from tools.env.collect import collect_env

    return collect_env(import_torch=p.import_torch)


def render(result: ToolResult, con: Console) -> None:
    """The variables (already redacted) and the versions found."""
    from rich.markup import escape

    d = result.data
    for k, v in d.get("variables", {}).items():
        con.print(escape(f"  {k}={v}"))
    pk = d.get("versions", {}).get("packages", {})
    con.print(escape("  versions: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v)))


SPEC = ToolSpec(
    "env",
    "Environment of this node: NCCL_*/TORCH_*/CUDA_* variables (secrets redacted), "
    "python/torch/NCCL/CUDA/driver and framework versions, container, /dev/shm, "
    "ulimits, cgroup memory, interfaces and MTUs, IB devices, nvidia_peermem, fabric "
    "manager; with lint findings for risky settings.",
    EnvParams, run,
    prerequisites=("torch for its CUDA/NCCL versions (optional)",),
    # importing torch on a busy node can take a while
    timeout=lambda p: 120.0 if p.import_torch else 60.0, render=render,
    llm=LlmTool("node_env", fixed={"import_torch": False}),
    mcp=McpTool("node_env", fields=("import_torch",), defaults={"import_torch": False}),
    title='environment variables (redacted), versions, limits, network, with lint findings',
)
