"""`xid`: NVIDIA Xid errors in the kernel log, declared once (see `tools.params.ToolSpec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from tools.params import STRICT, McpTool, Params, RunContext, ToolSpec
from tools.result import ToolResult

if TYPE_CHECKING:
    from rich.console import Console

#: The only files a remote caller may ask the Xid scan to read.
ALLOWED_LOG_FILES = ("/var/log/kern.log", "/var/log/syslog", "/var/log/messages",
                     "/var/log/dmesg")


class XidParams(Params):
    file: str | None = Field(None, max_length=4096,
                             description="a saved dmesg/journal/kern.log; default: `dmesg`")


class XidRequest(XidParams):
    """Through the agent: dmesg, or one of the fixed kernel-log files."""

    model_config = STRICT

    @field_validator("file")
    @classmethod
    def _allowed_file(cls, v: str | None) -> str | None:
        if v is not None and v not in ALLOWED_LOG_FILES:
            raise ValueError(f"file must be one of {', '.join(ALLOWED_LOG_FILES)} "
                             "(or omitted for dmesg)")
        return v


def run(p: XidParams, ctx: RunContext) -> ToolResult:
    from tools.xid.scan import scan_xid

    return scan_xid(file=p.file)


def render(result: ToolResult, con: Console) -> None:
    from rich.markup import escape

    d = result.data
    con.print(escape(f"  {d.get('count', 0)} Xid events; codes {d.get('codes', {})}"))


SPEC = ToolSpec(
    "xid",
    "Scan kernel logs (dmesg or a given file) for NVIDIA Xid errors and explain each "
    "code: GPU fallen off the bus, ECC, NVLink, MMU faults, with severity.",
    XidParams, run,
    prerequisites=("permission to read dmesg, or a log file",),
    timeout=lambda p: 60.0, render=render, request=XidRequest,
    mcp=McpTool("node_xid", fields=("file",), paths=("file",)),
    title='NVIDIA Xid errors in the kernel log, explained',
)
