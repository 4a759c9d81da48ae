"""The collective bandwidth probe: launch one worker process per rank, bound
every step in time, merge per-rank results into nccl-tests style rows.

Single node: workers (`python -m tools.probe.worker`) rendezvous on 127.0.0.1
through the environment variables torchrun sets. Multi-node (`nnodes > 1`): the
same worker runs under `python -m torch.distributed.run --rdzv-backend c10d
--rdzv-endpoint HOST:PORT` on every node, and each node reports the rows its own
ranks measured. torch is never imported here: only the workers import it.
"""

from __future__ import annotations

import importlib.util
import socket
import sys
import tempfile
from pathlib import Path

from tools.netaddr import is_loopback_ip
from tools.probe.baselines import baseline_findings
from tools.probe.busbw import sweep_sizes
from tools.probe.launch import (
    Command,
    ProgressFn,
    rank_commands,
    report,
    run_commands,
    started_ranks,
    worker_args,
    worker_env,
)
from tools.probe.params import ProbeParams
from tools.result import ToolResult

TOOL = "probe"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gpu_info(backend: str) -> tuple[int | None, str | None, str | None]:
    """(GPU count, GPU name, reason when unknown) from NVML, for nccl runs."""
    from tools.nvml import NvmlClient, NvmlUnavailableError

    try:
        with NvmlClient() as c:
            n = c.count()
            return n, c.gpu(0)["name"] if n else None, None
    except NvmlUnavailableError as exc:
        return None, None, str(exc)


def invocation_of(p: ProbeParams) -> str:
    text = (f"probe backend={p.backend} nproc={p.nproc} bytes={p.min_bytes}..{p.max_bytes}"
            f" x{p.factor:g} warmup={p.warmup} iters={p.iters} "
            f"collectives={','.join(p.collectives)}")
    if p.rdzv_endpoint:
        text += (f" nnodes={p.nnodes} node_rank={p.node_rank} rdzv=c10d:{p.rdzv_endpoint}"
                 f" id={p.rdzv_id}")
    return text


def run_probe(params: ProbeParams, *, fault: str | None = None,
              on_progress: ProgressFn | None = None) -> ToolResult:
    """Run the sweep (or nccl-tests when `params.nccl_tests` is set). Never raises.

    `fault` is the test-only fault spec for the workers (see `tools.probe.worker`); the
    caller decides whether one may be injected, workers never inherit one. `on_progress`
    hears which step (collective, size, k of N) the slowest rank is in.
    """
    p = params
    invocation = invocation_of(p)
    if p.nccl_tests:
        from tools.probe.nccl_tests import run_nccl_tests

        return run_nccl_tests(p)
    if importlib.util.find_spec("torch") is None:
        return ToolResult.unavailable(TOOL, invocation, "torch is not installed on this node")
    gpu_name, nproc = None, p.nproc
    if p.backend == "nccl":
        count, gpu_name, reason = gpu_info(p.backend)
        if not count:
            return ToolResult.unavailable(
                TOOL, invocation, f"the NCCL probe needs GPUs: {reason or 'no GPU found'}; "
                "use backend gloo for a CPU-only check")
        nproc = nproc or count
    nproc = nproc or 2
    sizes = sweep_sizes(p.min_bytes, p.max_bytes, p.factor)
    with tempfile.TemporaryDirectory(prefix="ncclbot-probe-") as tmp:
        out = Path(tmp)
        if p.rdzv_endpoint:
            result = _run_torchrun(p, sizes, nproc, out, fault, invocation, on_progress)
        else:
            result = _run_local(p, sizes, nproc, out, fault, invocation, on_progress)
    if result.status == "success" and p.plot:
        from tools.probe.plot import plot_busbw

        err = plot_busbw(result.data["results"], p.plot, title=invocation)
        result.data["plot"] = p.plot if err is None else None
        if err:
            result.data["plot_error"] = err
    if result.status == "success" and not p.rdzv_endpoint:
        result.findings += baseline_findings(result.data["results"], p.backend, gpu_name, nproc)
    return result


def _run_local(p: ProbeParams, sizes: list[int], nproc: int, out: Path, fault: str | None,
               invocation: str, on_progress: ProgressFn | None = None) -> ToolResult:
    env = worker_env(fault, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                     WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc))
    ranks = list(range(nproc))
    outcome = run_commands(p, out, rank_commands(p, sizes, out, ranks, env), ranks, on_progress)
    return report(out, ranks, outcome, invocation, {"backend": p.backend, "nproc": nproc})


def torchrun_argv(p: ProbeParams, sizes: list[int], nproc: int, out: Path) -> list[str]:
    """`python -m torch.distributed.run ... -m tools.probe.worker ...` for this node."""
    host = (p.rdzv_endpoint or "").rpartition(":")[0].strip("[]")
    conf = f"join_timeout={int(p.collective_timeout + 60)}"
    if p.node_rank is not None:  # c10d assigns ranks itself; node 0 hosts the store
        conf += f",is_host={int(p.node_rank == 0)}"
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(p.nnodes),
            "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", str(p.rdzv_endpoint), "--rdzv-id", p.rdzv_id,
            "--rdzv-conf", conf, "--max-restarts", "0"]
    # every "node" is this machine: keep all traffic on loopback
    if host == "localhost" or is_loopback_ip(host):
        argv += ["--local-addr", host]
    return [*argv, "-m", "tools.probe.worker", *worker_args(p, sizes, out)]


def _run_torchrun(p: ProbeParams, sizes: list[int], nproc: int, out: Path, fault: str | None,
                  invocation: str, on_progress: ProgressFn | None = None) -> ToolResult:
    """This node's share of a multi-node sweep through torchrun's c10d rendezvous."""
    env = worker_env(fault, TORCHELASTIC_ERROR_FILE=str(out / "torchrun-error.json"))
    outcome = run_commands(p, out, [Command(torchrun_argv(p, sizes, nproc, out), env,
                                            "torchrun")], None, on_progress)
    ranks = started_ranks(out)
    base: dict[str, object] = {"backend": p.backend, "nproc": nproc, "nnodes": p.nnodes,
                            "node_rank": p.node_rank, "ranks": ranks,
                            "rendezvous": {"backend": "c10d", "endpoint": p.rdzv_endpoint,
                                           "id": p.rdzv_id}}
    result = report(out, ranks, outcome, invocation, base,
                    prefix=f"node {p.node_rank if p.node_rank is not None else '?'}: ")
    if result.status == "success":
        result.data["world_size"] = p.nnodes * nproc
    return result
