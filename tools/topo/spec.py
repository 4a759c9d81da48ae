"""`topo`: GPU and network topology of a node, declared once (see `tools.params.ToolSpec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from tools.params import STRICT, LlmTool, McpTool, Params, RunContext, ToolSpec
from tools.result import ToolResult

if TYPE_CHECKING:
    from rich.console import Console


class TopoParams(Params):
    topo_file: str | None = Field(None, max_length=4096,
                                  description="analyse a saved `nvidia-smi topo -m` output "
                                              "instead")
    topo_text: str | None = Field(None, max_length=200_000,
                                  description="pasted `nvidia-smi topo -m` output")


class TopoRequest(TopoParams):
    """Through the agent: pasted text only, no file of the node's is named."""

    model_config = STRICT

    @field_validator("topo_file")
    @classmethod
    def _no_file(cls, v: str | None) -> str | None:
        if v is not None:
            raise ValueError("topo_file is not accepted through the agent; send topo_text")
        return v


def run(p: TopoParams, ctx: RunContext) -> ToolResult:
    from tools.files import open_regular
    from tools.topo.collect import collect_topology

    text = p.topo_text
    if p.topo_file:
        try:
            with open_regular(p.topo_file) as fh:
                text = fh.read(2_000_000)
        except OSError as exc:
            return ToolResult.failed("topo", f"topo --topo-file {p.topo_file}",
                                     f"cannot read {p.topo_file}: {exc.strerror or exc}")
    return collect_topology(topo_text=text)


def render(result: ToolResult, con: Console) -> None:
    """The topology matrix (GPUs x GPUs/NICs, CPU and NUMA affinity) and NIC placement."""
    from rich.markup import escape
    from rich.table import Table

    d = result.data
    if not d.get("topology"):
        return
    topo = d["topology"]
    gpus = topo["gpus"]
    t = Table("", *map(escape, gpus), "CPU affinity", "NUMA",
              title=escape(f"topology ({d.get('source')})"))
    for a in gpus:
        t.add_row(escape(a), *[escape("X" if a == b else topo["links"].get(a, {}).get(b, ""))
                               for b in gpus], escape(str(topo["cpu_affinity"].get(a, ""))),
                  escape(str(topo["numa_affinity"].get(a, ""))))
    con.print(t)
    for nic in topo["nics"]:
        near = [g for g in gpus if topo["links"].get(g, {}).get(nic) in ("PIX", "PXB")]
        con.print(escape(f"  {topo['nic_names'].get(nic, nic)}: shares a PCIe switch with "
                         f"{', '.join(near) or 'no GPU'}"))


SPEC = ToolSpec(
    "topo",
    "GPU and network topology of this node: GPUs (model, memory, ECC, remapped rows), "
    "NVLink state and errors, P2P matrix, the nvidia-smi topology letters between GPUs "
    "and NICs, NIC NUMA placement, PCIe ACS and IOMMU. Use for slow or hanging "
    "intra-node communication, P2P/NVLink errors and GPU health.",
    TopoParams, run,
    prerequisites=("NVML (nvidia-ml-py + driver) for GPU facts", "sysfs",
                   "lspci for PCIe ACS"),
    timeout=lambda p: 60.0, render=render, request=TopoRequest,
    llm=LlmTool("node_topology"),
    mcp=McpTool("node_topology", fields=("topo_text",)),
    title='GPU/NIC topology, NVLink, P2P, ACS, IOMMU and GPU health',
)
