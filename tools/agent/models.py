"""Request and reply bodies of the node agent.

A tool's request body is its `ToolSpec.request_model()`: its parameter model made strict
(JSON `true` or `"5"` is not an integer, `"false"` is not a boolean), or the narrower model
its own folder declares (no files a remote caller names, no binaries run). `REQUESTS` maps
each tool to it; the probe's siblings (check, status, port) are declared here.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.params import STRICT, Params, ProbeProgress
from tools.probe.remote import ProbeRequest, Rendezvous
from tools.registry import TOOLS

#: tool -> the body its route accepts
REQUESTS: dict[str, type[Params]] = {name: spec.request_model() for name, spec in TOOLS.items()}

__all__ = ["REQUESTS", "CheckReply", "CheckRequest", "PortReply", "ProbeProgress", "ProbeRequest",
           "Rendezvous", "StatusReply"]


class CheckRequest(BaseModel):
    """Would a probe start now (`POST /v1/probe/check`)?"""

    model_config = STRICT

    force: bool = Field(False, description="as the probe would be sent")


class CheckReply(BaseModel):
    ready: bool


class PortReply(BaseModel):
    port: int


class StatusReply(BaseModel):
    """`POST /v1/probe/status`: is a probe running here, whose, and how far along."""

    running: bool
    holder: str | None = None
    since: str | None = None
    progress: ProbeProgress | None = None
