"""What the `hang` diagnostic sends back from one node (typed, JSON over the agent)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tools.hang.ras import RasStatus


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Frame(_Model):
    """One Python (or native) frame, innermost first in a stack."""

    function: str
    file: str
    line: int | None = None


class ThreadStack(_Model):
    name: str
    active: bool = False  # running on a CPU when sampled (not waiting)
    frames: list[Frame] = Field(default_factory=list)


class RankSample(_Model):
    """One training process: who it is in the job, and where its threads are."""

    pid: int
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    job: str | None = None  # TORCHELASTIC_RUN_ID / SLURM_JOB_ID
    master: str | None = None  # MASTER_ADDR:MASTER_PORT
    uid: int | None = None  # the process's owner
    launcher: int | None = None  # the pid of the torchrun / srun step that started it here
    cmdline: str = ""
    threads: list[ThreadStack] = Field(default_factory=list)
    stack_error: str | None = None
    #: the rank's Flight Recorder dump (base64 of the file it wrote), read by the bot
    fr_dump_b64: str | None = None
    fr_note: str | None = None


class GpuSample(_Model):
    index: int
    utilization_pct: list[int] = Field(default_factory=list)  # one value per sample
    power_w: list[float] = Field(default_factory=list)
    sm_clock_mhz: list[int] = Field(default_factory=list)


class HangSample(_Model):
    """Everything one node saw of a hanging job."""

    host: str
    ranks: list[RankSample] = Field(default_factory=list)
    #: NCCL RAS, two polls a few seconds apart
    ras: list[RasStatus] = Field(default_factory=list)
    ras_note: str | None = None
    gpus: list[GpuSample] = Field(default_factory=list)
    gpu_note: str | None = None
    xid: list[str] = Field(default_factory=list)  # recent Xid lines, redacted
    notes: list[str] = Field(default_factory=list)
