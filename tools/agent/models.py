"""Request bodies the agent accepts: the tools' parameter models, narrowed for remote callers.

Remote callers may not name files to write or binaries to run, and may read only the
fixed kernel-log files; everything else keeps the bounds of `tools.registry`. Types are
strict: JSON `true` or `"5"` is not an integer, `"false"` is not a boolean.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tools.hang.collect import HangParams
from tools.probe.params import ProbeParams
from tools.registry import EnvParams, TopoParams, XidParams

#: The only files a remote caller may ask the Xid scan to read.
ALLOWED_LOG_FILES = ("/var/log/kern.log", "/var/log/syslog", "/var/log/messages",
                     "/var/log/dmesg")
_HOST = r"^[A-Za-z0-9]([A-Za-z0-9.:-]{0,252})$"
STRICT = ConfigDict(extra="forbid", strict=True)


class TopoRequest(TopoParams):
    model_config = STRICT

    @field_validator("topo_file")
    @classmethod
    def _no_file(cls, v: str | None) -> str | None:
        if v is not None:
            raise ValueError("topo_file is not accepted through the agent; send topo_text")
        return v


class EnvRequest(EnvParams):
    model_config = STRICT


class XidRequest(XidParams):
    model_config = STRICT

    @field_validator("file")
    @classmethod
    def _allowed_file(cls, v: str | None) -> str | None:
        if v is not None and v not in ALLOWED_LOG_FILES:
            raise ValueError(f"file must be one of {', '.join(ALLOWED_LOG_FILES)} "
                             "(or omitted for dmesg)")
        return v


class HangRequest(HangParams):
    """A hang sample of this node's ranks: only processes with a rank in their environment
    are ever looked at, and `pattern` is plain text (no regex)."""

    model_config = STRICT


class Rendezvous(BaseModel):
    """Where this node's ranks join a multi-node probe (env:// rendezvous, torchrun style)."""

    model_config = STRICT

    master_addr: str = Field(pattern=_HOST, max_length=253,
                             description="address of the node whose rank 0 hosts the store")
    master_port: int = Field(ge=1024, le=65535)
    node_rank: int = Field(ge=0, le=1023)
    nnodes: int = Field(ge=1, le=1024)
    group_id: str = Field("", max_length=64, pattern=r"^[A-Za-z0-9_-]*$",
                          description="shown in the audit log")

    @model_validator(mode="after")
    def _rank(self) -> Rendezvous:
        if self.node_rank >= self.nnodes:
            raise ValueError("node_rank must be < nnodes")
        return self


class ProbeRequest(ProbeParams):
    model_config = STRICT

    force: bool = Field(False, description="run even while processes hold the GPUs "
                        "(only for users in the agent's force allow list)")
    rendezvous: Rendezvous | None = Field(None, description="join a multi-node probe")

    @field_validator("plot", "nccl_tests")
    @classmethod
    def _no_paths(cls, v: str | None) -> str | None:
        if v is not None:
            raise ValueError("not accepted through the agent (no files written, no binaries run)")
        return v

    @field_validator("rdzv_endpoint", "node_rank")
    @classmethod
    def _no_torchrun(cls, v: object) -> object:
        if v is not None:
            raise ValueError("not accepted through the agent; the bot sends `rendezvous` "
                             "for a multi-node probe")
        return v

    @field_validator("nnodes")
    @classmethod
    def _one_node(cls, v: int) -> int:
        if v != 1:
            raise ValueError("not accepted through the agent; the bot sends `rendezvous` "
                             "for a multi-node probe")
        return v

    @model_validator(mode="after")
    def _group(self) -> ProbeRequest:
        if self.rendezvous is not None and self.nproc is None:
            raise ValueError("nproc (ranks per node) is required with rendezvous")
        return self

    def tool_params(self) -> ProbeParams:
        return ProbeParams.model_validate(self.model_dump(exclude={"force", "rendezvous"}))


class CheckRequest(BaseModel):
    """Would a probe start now (`POST /v1/probe/check`)?"""

    model_config = STRICT

    force: bool = Field(False, description="as the probe would be sent")


class CheckReply(BaseModel):
    ready: bool


class PortReply(BaseModel):
    port: int


class ProbeProgress(BaseModel):
    """Where a running probe's sweep is: the slowest rank's step."""

    step: int = Field(description="1-based step the slowest rank is in; 0 while starting")
    steps: int = Field(description="collectives x message sizes")
    collective: str
    bytes: int
    ranks: int = Field(description="ranks that have started")


class StatusReply(BaseModel):
    """`POST /v1/probe/status`: is a probe running here, whose, and how far along."""

    running: bool
    holder: str | None = None
    since: str | None = None
    progress: ProbeProgress | None = None
