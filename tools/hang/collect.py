"""The `hang` diagnostic: for a job's ranks on this node, their Python stacks (py-spy), a
Flight Recorder dump through each rank's debug pipe, NCCL RAS (two polls), a short GPU sample
and recent Xid lines. Bounded in time; every part that cannot run says why."""

from __future__ import annotations

import base64
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from pydantic import Field

from tools.hang import ras
from tools.hang.model import GpuSample, HangSample, RankSample
from tools.hang.pipe import request_dump
from tools.hang.procs import TrainingProcess, find_processes, nccl_version_of
from tools.hang.ras import RasStatus
from tools.hang.stacks import dump_stacks
from tools.params import Params
from tools.redact import redact_text
from tools.result import Finding, ToolResult

TOOL = "hang"


class HangParams(Params):
    pids: list[int] = Field(default_factory=list, max_length=256,
                            description="the ranks' process ids (default: every process with "
                                        "RANK and LOCAL_RANK in its environment)")
    pattern: str | None = Field(None, max_length=200,
                                description="only processes whose command line contains this "
                                            "text")
    job: str | None = Field(None, max_length=200,
                            description="only this job (TORCHELASTIC_RUN_ID or SLURM_JOB_ID)")
    native: bool = Field(False, description="include native (C/C++) frames in the stacks")
    flight_recorder: bool = Field(True, description="ask each rank for a Flight Recorder "
                                                    "dump through its debug pipe")
    ras_port: int | None = Field(28028, ge=1, le=65535,
                                 description="NCCL RAS port on this node (none: skip RAS)")
    ras_interval_s: float = Field(3.0, ge=0.5, le=10.0,
                                  description="seconds between the two RAS polls")
    nccl_version: str | None = Field(None, max_length=64, pattern=r"^[0-9][0-9A-Za-z.+_-]*$",
                                     description="the job's NCCL version (default: read from "
                                                 "the library the ranks loaded); RAS is not "
                                                 "asked without one, as some versions crash")
    gpu: bool = Field(True, description="sample GPU utilisation, power and clocks (NVML)")
    timeout_s: float = Field(20.0, ge=2.0, le=60.0, description="per-part time limit")


def _rank_sample(tp: TrainingProcess, p: HangParams) -> RankSample:
    threads, why = dump_stacks(tp.pid, native=p.native, timeout_s=min(10.0, p.timeout_s))
    sample = RankSample(pid=tp.pid, rank=tp.rank, local_rank=tp.local_rank,
                        world_size=tp.world_size, job=tp.job, cmdline=redact_text(tp.cmdline[:500]),
                        threads=threads, stack_error=why)
    if p.flight_recorder:
        # a rank's first dump may take seconds (it symbolizes its stack frames)
        data, note = request_dump(tp, timeout_s=min(15.0, p.timeout_s))
        sample.fr_note = note
        if data:
            sample.fr_dump_b64 = base64.b64encode(data).decode()
    return sample


def sample_gpus(samples: int = 3, every_s: float = 0.3) -> tuple[list[GpuSample], str | None]:
    """Utilisation, power and SM clock of each GPU, a few times; or why not (no NVML)."""
    from tools.nvml import NvmlClient, NvmlUnavailableError

    try:
        with NvmlClient() as nv:
            gpus = [GpuSample(index=i) for i in range(nv.count())]
            for n in range(samples):
                for g in gpus:
                    util, power, clock = nv.activity(g.index)
                    if util is not None:
                        g.utilization_pct.append(util)
                    if power is not None:
                        g.power_w.append(power)
                    if clock is not None:
                        g.sm_clock_mhz.append(clock)
                if n + 1 < samples:
                    time.sleep(every_s)
            return gpus, None
    except NvmlUnavailableError as exc:
        return [], f"{exc} (no GPU sample)"


def _ras(p: HangParams, version: str | None) -> tuple[list[RasStatus], str | None]:
    """Two RAS polls `ras_interval_s` apart (counts that move are progress)."""
    if p.ras_port is None:
        return [], "RAS not asked for"
    polls: list[RasStatus] = []
    try:
        for n in range(2):
            if n:
                time.sleep(p.ras_interval_s)
            polls.append(ras.poll(port=p.ras_port, timeout_s=min(5.0, p.timeout_s),
                                  nccl_version=p.nccl_version or version))
    except ras.RasUnavailableError as exc:
        return polls, f"NCCL RAS: {exc}"
    return polls, None


def _xid() -> list[str]:
    from tools.xid.scan import scan_xid

    result = scan_xid()
    events = result.data.get("events", []) if result.status == "success" else []
    return [redact_text(str(e.get("message", ""))[:300]) for e in events[-20:]]


def collect_hang(p: HangParams, host: str | None = None) -> ToolResult:
    """One node's view of a hanging job (see the module docstring)."""
    invocation = f"hang {p.model_dump(exclude_defaults=True)}"
    procs, notes = find_processes(p.pids or None, p.pattern, p.job, self_pid=os.getpid())
    sample = HangSample(host=host or socket.gethostname(), notes=notes)
    if not procs:
        return ToolResult.unavailable(
            TOOL, invocation, "no rank of a distributed job found on this node (looked for "
            "processes with RANK and LOCAL_RANK in their environment"
            + (f", matching {p.pattern!r}" if p.pattern else "")
            + (f", of job {p.job}" if p.job else "") + ")", **sample.model_dump(mode="json"))
    with ThreadPoolExecutor(max_workers=min(8, len(procs) + 2)) as pool:
        ranks = pool.map(lambda tp: _rank_sample(tp, p), procs)
        version = next((v for v in (nccl_version_of(tp.pid) for tp in procs[:4]) if v), None)
        ras_f = pool.submit(_ras, p, version)
        gpu_f = pool.submit(sample_gpus) if p.gpu else None
        sample.ranks = list(ranks)
        sample.ras, sample.ras_note = ras_f.result()
        if gpu_f is not None:
            sample.gpus, sample.gpu_note = gpu_f.result()
    if sample.gpus:
        sample.xid = _xid()
    findings = [Finding(severity="warn", rule="hang-stacks-unavailable", message=r.stack_error)
                for r in sample.ranks if r.stack_error][:4]
    return ToolResult(tool=TOOL, status="success", invocation=invocation,
                      data=sample.model_dump(mode="json"), findings=findings)
