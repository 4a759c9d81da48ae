"""The node tools, each declared once as a `ToolSpec`: name, description (for people and
the LLM), bounded parameter model, prerequisites and runner. The CLI options, the node
agent's request models, the agent's tool list, Slack's commands and buttons and the cards'
probe names all read `TOOLS`; `run_local` validates a request and runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError

from tools.env.collect import collect_env
from tools.files import open_regular
from tools.hang.collect import HangParams, collect_hang
from tools.params import Params
from tools.probe.params import ProbeParams
from tools.probe.run import run_probe
from tools.result import ToolResult
from tools.topo.collect import collect_topology
from tools.xid.scan import scan_xid

#: hears where a probe's sweep is (see `tools.probe.launch.sweep_position`)
Progress = Callable[[dict[str, Any]], None]

class TopoParams(Params):
    topo_file: str | None = Field(None, max_length=4096,
                                  description="path of a saved `nvidia-smi topo -m` output")
    topo_text: str | None = Field(None, max_length=200_000,
                                  description="pasted `nvidia-smi topo -m` output")


class EnvParams(Params):
    import_torch: bool = Field(True, description="import torch to read its CUDA/NCCL versions")


class XidParams(Params):
    file: str | None = Field(None, max_length=4096,
                             description="a dmesg/journal/kern.log file; default: `dmesg`")


def _run_topo(p: Any, fault: str | None, progress: Progress | None) -> ToolResult:
    text = p.topo_text
    if p.topo_file:
        try:
            with open_regular(p.topo_file) as fh:
                text = fh.read(2_000_000)
        except OSError as exc:
            return ToolResult.failed("topo", f"topo --topo-file {p.topo_file}",
                                     f"cannot read {p.topo_file}: {exc.strerror or exc}")
    return collect_topology(topo_text=text)


def _run_env(p: Any, fault: str | None, progress: Progress | None) -> ToolResult:
    return collect_env(import_torch=p.import_torch)


def _run_probe(p: Any, fault: str | None, progress: Progress | None) -> ToolResult:
    return run_probe(p, fault=fault, on_progress=progress)


def _run_xid(p: Any, fault: str | None, progress: Progress | None) -> ToolResult:
    return scan_xid(file=p.file)


def _run_hang(p: Any, fault: str | None, progress: Progress | None) -> ToolResult:
    return collect_hang(p)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: type[Params]
    prerequisites: tuple[str, ...]
    #: run(validated params, test-only fault spec, progress listener) -> result
    run: Callable[[Any, str | None, Progress | None], ToolResult]


TOOLS: dict[str, ToolSpec] = {s.name: s for s in (
    ToolSpec("topo",
             "GPU and network topology of this node: GPUs (model, memory, ECC, remapped rows), "
             "NVLink state and errors, P2P matrix, the nvidia-smi topology letters between GPUs "
             "and NICs, NIC NUMA placement, PCIe ACS and IOMMU. Use for slow or hanging "
             "intra-node communication, P2P/NVLink errors and GPU health.",
             TopoParams, ("NVML (nvidia-ml-py + driver) for GPU facts; sysfs; lspci for ACS",),
             _run_topo),
    ToolSpec("env",
             "Environment of this node: NCCL_*/TORCH_*/CUDA_* variables (secrets redacted), "
             "python/torch/NCCL/CUDA/driver and framework versions, container, /dev/shm, "
             "ulimits, cgroup memory, interfaces and MTUs, IB devices, nvidia_peermem, fabric "
             "manager; with lint findings for risky settings.",
             EnvParams, (), _run_env),
    ToolSpec("probe",
             "Run a bounded collective bandwidth sweep (all_reduce, all_gather, reduce_scatter, "
             "broadcast, alltoall, send/recv) across local GPUs with NCCL (or CPU with gloo), "
             "reporting algbw/busbw per size, correctness, hangs, and the share of the "
             "expected bandwidth for known hardware.",
             ProbeParams, ("torch with the requested backend", "GPUs for backend nccl"),
             _run_probe),
    ToolSpec("xid",
             "Scan kernel logs (dmesg or a given file) for NVIDIA Xid errors and explain each "
             "code: GPU fallen off the bus, ECC, NVLink, MMU faults, with severity.",
             XidParams, ("permission to read dmesg, or a log file",), _run_xid),
    ToolSpec("hang",
             "For a hanging job's ranks on this node: each rank's Python stack (py-spy), a "
             "Flight Recorder dump through its debug pipe, NCCL RAS (two polls: which ranks "
             "launched how many collectives, which are missing or dead), a GPU sample and "
             "recent Xid lines. Use when a job is stuck now; the bot compares the nodes and "
             "names the odd rank out.",
             HangParams, ("py-spy and permission to ptrace the ranks (root or "
                          "CAP_SYS_PTRACE)", "NCCL RAS (NCCL >= 2.24) for RAS",
                          "NVML for the GPU sample"), _run_hang),
)}


def validate(tool: str, params: dict[str, Any] | None) -> Params:
    """The validated parameter model; KeyError for unknown tools, ValidationError on bad input."""
    return TOOLS[tool].params.model_validate(params or {})


def run_local(tool: str, params: dict[str, Any] | None = None, *,
              fault: str | None = None,
              on_progress: Callable[[dict[str, Any]], None] | None = None) -> ToolResult:
    """Validate and run one tool on this node. Never raises: bad input is an error result.

    `fault`: a test-only fault spec for the probe's workers (`tools.probe.worker`).
    `on_progress`: hears where a probe's sweep is (see `tools.probe_launch.sweep_position`).
    """
    invocation = f"{tool} {params or {}}"
    if tool not in TOOLS:
        return ToolResult.failed(tool, invocation,
                                 f"unknown tool {tool!r}; known: {', '.join(TOOLS)}")
    try:
        p = validate(tool, params)
    except ValidationError as exc:
        return ToolResult.failed(tool, invocation, f"invalid parameters: {exc}")
    try:
        return TOOLS[tool].run(p, fault, on_progress)
    except Exception as exc:  # noqa: BLE001 - a tool bug must still come back as a result
        return ToolResult.failed(tool, invocation, f"{type(exc).__name__}: {exc}")
