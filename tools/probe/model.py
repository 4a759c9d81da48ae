"""The probe's typed shapes: the rows its workers write and it merges, where a sweep is, the
hardware an agent reports, and `ProbeData`, its `ToolResult.data` read back (validated) by
whoever uses a result: the bot's multi-node probe, Slack and the terminal."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict


class StepRow(TypedDict):
    """One timed step of one rank (`tools.probe.worker`)."""

    collective: str
    bytes: int
    time_us: float
    correct: bool


class ProbeRow(StepRow):
    """One step merged over the ranks, with its bandwidths (`tools.probe.launch.merge_rows`)."""

    algbw_gbps: float
    busbw_gbps: float


class StepAt(TypedDict, total=False):
    """A worker's `rank{R}.progress`: the step it is in ("init", "finish") since `t`."""

    collective: str
    bytes: int
    t: float


class RankFile(TypedDict, total=False):
    """A worker's `rank{R}.json`: its rows, or why it stopped."""

    rank: int
    world_size: int
    status: str
    device: str
    backend: str
    rows: list[StepRow]
    error: str
    failed_at: StepAt


class Hardware(TypedDict, total=False):
    """What an agent's share of a multi-node probe ran on (for the expected busbw)."""

    gpu_name: str | None
    gpus: int | None
    ib_port_rates: list[str]


class Row(BaseModel):
    """`ProbeRow` as read back from a result."""

    model_config = ConfigDict(extra="ignore")

    collective: str
    bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    correct: bool | None = None


class Hang(BaseModel):
    """Where a probe that did not finish stopped."""

    model_config = ConfigDict(extra="ignore")

    collective: str | None = None
    bytes: int | None = None
    ranks_not_finished: list[int] = Field(default_factory=list)
    ranks_failed: dict[int, str] = Field(default_factory=dict)
    reason: str | None = None


class ProbeData(BaseModel):
    """The probe's `ToolResult.data` (its spec's `result` model); the fields that only some
    runs have are optional, and fields added later are kept unread."""

    model_config = ConfigDict(extra="ignore")

    backend: str | None = None
    nproc: int | None = None
    duration_s: float | None = None
    device: str | None = None
    results: list[Row] = Field(default_factory=list)
    hardware: Hardware = Field(default_factory=lambda: Hardware())
    hang: Hang | None = None

    def largest_busbw(self) -> float | None:
        """busbw at the largest size: all_reduce's when measured, else the collectives'
        mean."""
        top: dict[str, Row] = {}
        for r in self.results:
            if r.collective not in top or r.bytes > top[r.collective].bytes:
                top[r.collective] = r
        if not top:
            return None
        if "all_reduce" in top:
            return top["all_reduce"].busbw_gbps
        return sum(r.busbw_gbps for r in top.values()) / len(top)
