"""The `hang` diagnostic: for a job's ranks on this node, their Python stacks (py-spy), a
Flight Recorder dump through each rank's debug pipe, NCCL RAS (two polls), a short GPU sample
and recent Xid lines.

Bounded as a whole: one deadline for the request (`deadline_s`) inside which every rank has
its own time (a rank that never dumps, or whose pipe is full, loses only its own Flight
Recorder), ranks sampled in parallel by a bounded pool, one byte budget for all the dumps and
a cap on the reply's size. Every part that cannot run says why."""

from __future__ import annotations

import base64
import os
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from pydantic import Field, field_validator

from tools.hang import ras
from tools.hang.model import GpuSample, HangSample, RankSample, ThreadStack
from tools.hang.pipe import MAX_DUMP_BYTES, request_dump
from tools.hang.procs import RankSelection, TrainingProcess, find_processes, nccl_version_of
from tools.hang.ras import RasStatus
from tools.hang.stacks import dump_stacks
from tools.redact import redact_text
from tools.result import Finding, ToolResult

TOOL = "hang"
#: all the Flight Recorder dumps of one sample, at most (raw bytes; base64 adds a third)
MAX_FR_BYTES = 32 * 2**20
#: the reply's JSON, at most: dumps are dropped first (largest first), then side threads
MAX_REPLY_BYTES = 48 * 2**20
#: ranks whose stacks are read at once (py-spy), and whose dumps are waited for at once
MAX_WORKERS = 8
MAX_FR_WORKERS = 16
A = TypeVar("A")
B = TypeVar("B")
#: what the reply needs after the last rank (building and sending it)
_MARGIN_S = 1.0


class HangParams(RankSelection):
    native: bool = Field(False, description="include native (C/C++) frames in the stacks")
    flight_recorder: bool = Field(True, description="ask each rank for a Flight Recorder "
                                                    "dump through its debug pipe")
    ras_port: int | None = Field(28028, ge=1, le=65535,
                                 description="NCCL RAS port on this node (0 or none: do not "
                                             "ask RAS)")
    ras_interval_s: float = Field(3.0, ge=0.5, le=10.0,
                                  description="seconds between the two RAS polls")
    nccl_version: str | None = Field(None, max_length=64, pattern=r"^[0-9][0-9A-Za-z.+_-]*$",
                                     description="the job's NCCL version (default: read from "
                                                 "the library the ranks loaded); RAS is not "
                                                 "asked without one, as some versions crash")
    gpu: bool = Field(True, description="sample GPU utilisation, power and clocks (NVML)")
    timeout_s: float = Field(20.0, ge=2.0, le=60.0, description="per-part time limit")
    deadline_s: float = Field(45.0, ge=5.0, le=120.0, json_schema_extra={"cli": "--deadline"},
                              description="the whole sample's time limit: ranks not sampled "
                                          "by then are listed with a note")

    @field_validator("ras_port", mode="before")
    @classmethod
    def _no_ras(cls, v: object) -> object:
        return None if v == 0 and not isinstance(v, bool) else v


class ByteBudget:
    """Bytes left for the sample's dumps (thread-safe)."""

    def __init__(self, total: int) -> None:
        self._left, self._lock = total, threading.Lock()

    @property
    def left(self) -> int:
        with self._lock:
            return self._left

    def take(self, n: int) -> bool:
        with self._lock:
            if n > self._left:
                return False
            self._left -= n
            return True


def _base(tp: TrainingProcess) -> RankSample:
    return RankSample(pid=tp.pid, rank=tp.rank, local_rank=tp.local_rank,
                      world_size=tp.world_size, job=tp.job, master=tp.master, uid=tp.uid,
                      launcher=tp.launcher, cmdline=redact_text(tp.cmdline)[:500])


def _stacks(tp: TrainingProcess, p: HangParams,
            deadline: float) -> tuple[list[ThreadStack], str | None]:
    """One rank's Python stacks, within its own limit and the request's deadline."""
    left = deadline - time.monotonic()
    if left < 1.0:
        return [], "not sampled: the request's deadline came first"
    return dump_stacks(tp.pid, native=p.native, timeout_s=min(10.0, p.timeout_s, left))


def _flight_recorder(tp: TrainingProcess, p: HangParams, deadline: float,
                     budget: ByteBudget) -> tuple[str | None, str | None]:
    """One rank's dump (base64) or why not, within its own limit, the request's deadline and
    what is left of the sample's byte budget."""
    left = deadline - time.monotonic()
    if left < 2.0:
        return None, "Flight Recorder not asked: the request's deadline came first"
    # a rank's first dump may take seconds (it symbolizes its stack frames)
    data, note = request_dump(tp, timeout_s=min(15.0, p.timeout_s, left),
                              max_bytes=min(MAX_DUMP_BYTES, budget.left))
    if data and not budget.take(size := len(data)):
        return None, (f"its dump ({size} bytes) was dropped: the sample's "
                      f"{MAX_FR_BYTES // 2**20} MiB budget for Flight Recorder dumps is spent")
    return (base64.b64encode(data).decode() if data else None), note


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


def _ras(p: HangParams, version: str | None,
         deadline: float | None = None) -> tuple[list[RasStatus], str | None]:
    """Two RAS polls `ras_interval_s` apart (counts that move are progress)."""
    if p.ras_port is None:
        return [], "RAS not asked for"
    deadline = deadline if deadline is not None else time.monotonic() + p.deadline_s
    polls: list[RasStatus] = []
    try:
        for n in range(2):
            if n:
                time.sleep(p.ras_interval_s)
            left = deadline - time.monotonic()
            if left < 0.5:
                return polls, "NCCL RAS: not asked again, the request's deadline came first"
            polls.append(ras.poll(port=p.ras_port, timeout_s=min(5.0, p.timeout_s, left),
                                  nccl_version=p.nccl_version or version))
    except ras.RasUnavailableError as exc:
        return polls, f"NCCL RAS: {exc}"
    return polls, None


def _xid() -> list[str]:
    from tools.xid.scan import scan_xid

    result = scan_xid()
    events = result.data.get("events", []) if result.status == "success" else []
    return [redact_text(str(e.get("message", ""))[:300]) for e in events[-20:]]


def _outcome(f: Future[tuple[A, B]], late: tuple[A, B]) -> tuple[A, B]:
    """A part's result; `late` when it is not done by the deadline (it is cancelled, or
    ends on its own limit); a failure as its one-line reason."""
    if not f.done():
        f.cancel()
        return late
    if (exc := f.exception()) is not None:
        return late[0], f"failed: {type(exc).__name__}: {str(exc)[:200]}"  # type: ignore[return-value]
    return f.result()


def cap_reply(sample: HangSample, limit: int = MAX_REPLY_BYTES) -> None:
    """Keep the sample's JSON under `limit`: drop Flight Recorder dumps, largest first, then
    every thread but each rank's main one; each drop is noted."""
    size = len(sample.model_dump_json())
    for r in sorted((r for r in sample.ranks if r.fr_dump_b64),
                    key=lambda r: -len(r.fr_dump_b64 or "")):
        if size <= limit:
            return
        r.fr_dump_b64 = None
        r.fr_note = f"its dump was dropped to keep the reply under {limit // 2**20} MiB"
        size = len(sample.model_dump_json())
    if size <= limit:
        return
    for r in sample.ranks:
        main = next((t for t in r.threads if t.name == "MainThread"), None)
        r.threads = [main] if main is not None else r.threads[:1]
    sample.notes.append(f"only the main thread of each rank is sent, to keep the reply under "
                        f"{limit // 2**20} MiB")


def collect_hang(p: HangParams, host: str | None = None) -> ToolResult:
    """One node's view of a hanging job (see the module docstring)."""
    invocation = f"hang {p.model_dump(exclude_defaults=True)}"
    start = time.monotonic()
    deadline = start + p.deadline_s - _MARGIN_S
    procs, notes = find_processes(p.pids or None, p.pattern, p.job, self_pid=os.getpid())
    sample = HangSample(host=host or socket.gethostname(), notes=notes)
    if not procs:
        return ToolResult.unavailable(
            TOOL, invocation, "no rank of a distributed job found on this node (looked for "
            "processes with RANK and LOCAL_RANK in their environment"
            + (f", matching {p.pattern!r}" if p.pattern else "")
            + (f", of job {p.job}" if p.job else "") + ")", **sample.model_dump(mode="json"))
    budget = ByteBudget(MAX_FR_BYTES)
    stacks = ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(procs)),
                                thread_name_prefix="hang-stacks")
    dumps = ThreadPoolExecutor(max_workers=min(MAX_FR_WORKERS, len(procs)),
                               thread_name_prefix="hang-fr")
    side = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hang-side")
    try:
        stack_fs = [stacks.submit(_stacks, tp, p, deadline) for tp in procs]
        fr_fs = [dumps.submit(_flight_recorder, tp, p, deadline, budget)
                 for tp in procs] if p.flight_recorder else []
        version = next((v for v in (nccl_version_of(tp.pid) for tp in procs[:4]) if v), None)
        ras_f = side.submit(_ras, p, version, deadline)
        gpu_f = side.submit(sample_gpus) if p.gpu else None
        everything: list[Future[Any]] = [*stack_fs, *fr_fs, ras_f, *([gpu_f] if gpu_f else [])]
        wait(everything, timeout=max(0.0, deadline - time.monotonic()))
        for n, tp in enumerate(procs):
            rank = _base(tp)
            rank.threads, rank.stack_error = _outcome(
                stack_fs[n], ([], f"not sampled within the request's deadline "
                                  f"({p.deadline_s:g} s); name fewer ranks with --pids, or "
                                  "give a longer deadline"))
            if fr_fs:
                rank.fr_dump_b64, rank.fr_note = _outcome(fr_fs[n], (
                    None, "Flight Recorder not read within the request's deadline"))
            sample.ranks.append(rank)
        sample.ras, sample.ras_note = _outcome(
            ras_f, ([], "NCCL RAS: no answer within the request's deadline"))
        if gpu_f is not None:
            sample.gpus, sample.gpu_note = _outcome(
                gpu_f, ([], "no GPU sample within the request's deadline"))
    finally:
        for pool in (stacks, dumps, side):
            pool.shutdown(wait=False, cancel_futures=True)
    late = sum(1 for r in sample.ranks if (r.stack_error or "").startswith("not sampled"))
    late_fr = sum(1 for r in sample.ranks if (r.fr_note or "").startswith(
        ("Flight Recorder not read", "Flight Recorder not asked")))
    if late or late_fr:
        sample.notes.append(f"{late} of {len(procs)} ranks were not sampled and {late_fr} "
                            "Flight Recorder dumps not read within the request's deadline "
                            f"({p.deadline_s:g} s)")
    if sample.gpus and time.monotonic() < deadline:
        sample.xid = _xid()
    cap_reply(sample)
    findings = [Finding(severity="warn", rule="hang-stacks-unavailable", message=r.stack_error)
                for r in sample.ranks if r.stack_error][:4]
    return ToolResult(tool=TOOL, status="success", invocation=invocation,
                      data=sample.model_dump(mode="json"), findings=findings)
