"""This node's share of a multi-node probe: launch its ranks into an env:// rendezvous.

Rank r of node n is global rank n * nproc + r; node 0's rank 0 hosts the TCP store on
MASTER_ADDR:MASTER_PORT, as torchrun's static rendezvous does. Each agent reports the
rows its own ranks measured and, on failure, which of its ranks hung or failed, plus
what hardware it has (so the bot can pick the expected busbw from the baselines).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tools.probe.busbw import sweep_sizes
from tools.probe.launch import ProgressFn, rank_commands, report, run_commands, worker_env
from tools.probe.model import Hardware
from tools.probe.params import ProbeParams
from tools.probe.remote import Rendezvous
from tools.result import ToolResult


def hardware(backend: str, root: Path = Path("/")) -> Hardware:
    """GPU model and count (NVML) and active InfiniBand port rates (sysfs); for nccl only."""
    if backend != "nccl":
        return Hardware()
    from tools.probe.run import gpu_info
    from tools.sysfs import read_ib_devices

    count, name, _ = gpu_info(backend)
    ports = [p["rate"] or "" for d in read_ib_devices(root) for p in d["ports"]
             if p.get("state") == "ACTIVE" and (p.get("link_layer") or "").lower() == "infiniband"]
    return Hardware(gpu_name=name, gpus=count, ib_port_rates=ports)


def run_group_member(p: ProbeParams, rv: Rendezvous, *, fault: str | None = None,
                     on_progress: ProgressFn | None = None) -> ToolResult:
    """Run this node's ranks of one multi-node sweep (`rv`: where they join); never raises."""
    master_addr, master_port, node_rank, nnodes = (rv.master_addr, rv.master_port,
                                                   rv.node_rank, rv.nnodes)
    nproc = p.nproc or 1
    world = nproc * nnodes
    ranks = [node_rank * nproc + r for r in range(nproc)]
    invocation = (f"probe backend={p.backend} node_rank={node_rank}/{nnodes} nproc={nproc} "
                  f"rdzv={master_addr}:{master_port} bytes={p.min_bytes}..{p.max_bytes} "
                  f"collectives={','.join(p.collectives)}")
    sizes = sweep_sizes(p.min_bytes, p.max_bytes, p.factor)
    env = worker_env(fault, MASTER_ADDR=master_addr, MASTER_PORT=str(master_port),
                     WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(nproc),
                     GROUP_RANK=str(node_rank))
    base = {"backend": p.backend, "node_rank": node_rank, "ranks": ranks, "world_size": world,
            "hardware": hardware(p.backend)}
    with tempfile.TemporaryDirectory(prefix="ncclbot-group-") as tmp:
        out = Path(tmp)
        outcome = run_commands(p, out, rank_commands(p, sizes, out, ranks, env), ranks,
                               on_progress)
        return report(out, ranks, outcome, invocation, base, prefix=f"node rank {node_rank}: ")
