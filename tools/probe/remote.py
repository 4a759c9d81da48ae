"""The probe's request through the node agent: the parameters, narrowed for remote callers
(no files written, no binaries run, no torchrun of the caller's), plus `force` and the
rendezvous of a multi-node probe the bot sets up."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from tools.params import STRICT
from tools.probe.params import ProbeParams

_HOST = r"^[A-Za-z0-9]([A-Za-z0-9.:-]{0,252})$"


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
            raise ValueError("runs torchrun on this machine; through agents use --nodes A,B,.. "
                             "(the bot sets up the rendezvous)")
        return v

    @field_validator("nnodes")
    @classmethod
    def _one_node(cls, v: int) -> int:
        if v != 1:
            raise ValueError("runs torchrun on this machine; through agents use --nodes A,B,.. "
                             "(the bot sets up the rendezvous)")
        return v

    @model_validator(mode="after")
    def _group(self) -> ProbeRequest:
        if self.rendezvous is not None and self.nproc is None:
            raise ValueError("nproc (ranks per node) is required with rendezvous")
        return self

    def tool_params(self) -> ProbeParams:
        return ProbeParams.model_validate(self.model_dump(exclude={"force", "rendezvous"}))

    def joining(self, master_addr: str, master_port: int, index: int, size: int,
                group_id: str) -> ProbeRequest:
        """This request for member `index` of a `size`-node probe whose rank 0 (on
        `master_addr`) hosts the store."""
        rv = Rendezvous(master_addr=master_addr, master_port=master_port, node_rank=index,
                        nnodes=size, group_id=group_id)
        return self.model_copy(update={"rendezvous": rv})

    def body(self) -> dict[str, object]:
        """The JSON body the node agent receives (unset optional fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)


def group_request(body: Mapping[str, object]) -> ProbeRequest:
    """The request every member of a multi-node probe gets, from the command's options:
    ranks per node are required for nccl (the GPUs of each node), 1 for gloo by default.
    ValueError (the message names the option) when they do not validate."""
    fields = dict(body)
    if fields.get("nproc") is None:
        if fields.get("backend", "nccl") == "nccl":
            raise ValueError("--nproc (GPUs per node) is required for a multi-node nccl probe")
        fields["nproc"] = 1
    try:
        return ProbeRequest.model_validate(fields, strict=False)
    except ValidationError as exc:
        raise ValueError("; ".join(str(e["msg"]) for e in exc.errors())) from None
