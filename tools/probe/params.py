"""The probe's parameters: each bounded, and bounded together (sizes, memory, time)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from tools.params import Params
from tools.probe.busbw import COLLECTIVES
from tools.units import GIB, format_size

#: At most this many message sizes in one sweep (min..max by factor).
MAX_SIZES = 64
#: Per node, ranks x largest message: each rank holds up to ~3 buffers of max_bytes
#: (GPU memory for nccl, host memory for gloo).
MAX_NODE_BYTES = {"nccl": 64 * GIB, "gloo": 8 * GIB}
#: Ranks assumed when nproc is left to the node (GPUs for nccl, 2 for gloo).
DEFAULT_NPROC = {"nccl": 8, "gloo": 2}
#: An optimistic per-rank bus rate; a sweep that cannot finish within `timeout` even at
#: this rate is refused up front instead of being killed half-way.
FAST_BYTES_PER_S = {"nccl": 500e9, "gloo": 20e9}
Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall",
                     "sendrecv"]


class ProbeParams(Params):
    backend: Literal["nccl", "gloo"] = Field("nccl", description="nccl (GPUs) or gloo (CPU)")
    nproc: int | None = Field(None, ge=1, le=64,
                              description="ranks (default: GPUs for nccl, 2 for gloo)")
    #: `size`: the CLI also takes K/M/G (x1024), as nccl-tests' -b/-e
    min_bytes: int = Field(1024, ge=1, le=8 * GIB, json_schema_extra={"size": True},
                           description="smallest message: bytes, or with K/M/G (x1024) as "
                                       "nccl-tests' -b")
    max_bytes: int = Field(64 * 2**20, ge=1, le=8 * GIB, json_schema_extra={"size": True},
                           description="largest message, e.g. 16M, 1G")
    factor: float = Field(2.0, gt=1.0, le=1024.0, description="size step (nccl-tests' -f)")
    warmup: int = Field(5, ge=0, le=1000, description="untimed runs per size")
    iters: int = Field(20, ge=1, le=1000, description="timed runs per size")
    collective_timeout: float = Field(60.0, ge=1.0, le=1800.0,
                                      description="seconds one collective step may take")
    timeout: float = Field(600.0, ge=1.0, le=1800.0, description="seconds for the whole probe")
    collectives: list[Collective] = Field(default_factory=lambda: list(COLLECTIVES),
                                          min_length=1, max_length=6,
                                          description="which collectives, e.g. "
                                                      "all_reduce,all_gather")
    plot: str | None = Field(None, max_length=4096, description="write a busbw PNG to this file")
    nccl_tests: str | None = Field(None, max_length=4096,
                                   description="run NVIDIA nccl-tests from this directory")
    nnodes: int = Field(1, ge=1, le=1024, description="nodes in a torchrun c10d rendezvous; "
                        "run this same command on each (needs rdzv_endpoint)")
    node_rank: int | None = Field(None, ge=0, le=1023,
                                  description="this node's rank; node 0 hosts the c10d store")
    rdzv_endpoint: str | None = Field(
        None, max_length=260, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]{0,252}):"
        r"\d{1,5}$", description="HOST:PORT of the c10d rendezvous (torchrun --rdzv-endpoint)")
    rdzv_id: str = Field("ncclbot-probe", min_length=1, max_length=64,
                         pattern=r"^[A-Za-z0-9_.-]+$", description="torchrun --rdzv-id")

    @model_validator(mode="after")
    def _sizes(self) -> ProbeParams:
        if self.min_bytes > self.max_bytes:
            raise ValueError("min_bytes must be <= max_bytes")
        self._check_joint_bounds()
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise ValueError("nnodes > 1 needs rdzv_endpoint (HOST:PORT of the c10d store)")
        if self.node_rank is not None and self.node_rank >= self.nnodes:
            raise ValueError(f"node_rank must be < nnodes ({self.nnodes})")
        if self.rdzv_endpoint and not 0 < int(self.rdzv_endpoint.rpartition(":")[2]) < 65536:
            raise ValueError("rdzv_endpoint port must be 1-65535")
        return self

    def _check_joint_bounds(self) -> None:
        """Parameters each within bounds can still be too big together."""
        steps = math.ceil(math.log(self.max_bytes / self.min_bytes) / math.log(self.factor)
                          - 1e-9) + 1 if self.max_bytes > self.min_bytes else 1
        if steps > MAX_SIZES:
            raise ValueError(f"min_bytes {self.min_bytes} to max_bytes {self.max_bytes} by "
                             f"factor {self.factor:g} is {steps} message sizes; at most "
                             f"{MAX_SIZES} (raise factor or narrow the range)")
        nproc = self.nproc or DEFAULT_NPROC[self.backend]
        per_node, limit = nproc * self.max_bytes, MAX_NODE_BYTES[self.backend]
        if per_node > limit:
            raise ValueError(f"nproc {nproc} x max_bytes {format_size(self.max_bytes)} = "
                             f"{format_size(per_node)} of buffers per node; at most "
                             f"{format_size(limit)} for {self.backend} (lower max_bytes or nproc)")
        per_step = sum(min(self.max_bytes, self.min_bytes * self.factor ** i)
                       for i in range(steps))
        work = per_step * (self.warmup + self.iters) * len(self.collectives)
        rate = FAST_BYTES_PER_S[self.backend]
        if work / rate > self.timeout:
            raise ValueError(f"{len(self.collectives)} collective(s) x {self.warmup} warmup + "
                             f"{self.iters} iters over {steps} sizes up to "
                             f"{format_size(self.max_bytes)} moves {format_size(int(work))} per "
                             f"rank: over {work / rate:.0f} s even at {rate / 1e9:g} GB/s, "
                             f"longer than timeout {self.timeout:g} s (fewer iters, smaller sizes)")
