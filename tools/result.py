"""The one result shape every node diagnostic returns.

Failures are results with a reason, never exceptions: a tool whose
prerequisite is missing (no NVML, no torch) is `unavailable`; one that broke
while running is `error`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["success", "unavailable", "error"]
Severity = Literal["info", "warn", "error"]


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    severity: Severity
    rule: str
    message: str
    card: str | None = None


class ToolResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str
    status: Status
    #: the tool's data, JSON at the wire; read it through the tool's own model where it
    #: has one (`tools.probe.model.ProbeData`, `tools.hang.model.HangSample`)
    data: dict[str, Any] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    error: str | None = None
    invocation: str

    @classmethod
    def unavailable(cls, tool: str, invocation: str, reason: str, **data: object
                    ) -> ToolResult:
        return cls(tool=tool, status="unavailable", error=reason, invocation=invocation, data=data)

    @classmethod
    def failed(cls, tool: str, invocation: str, reason: str, **data: object) -> ToolResult:
        return cls(tool=tool, status="error", error=reason, invocation=invocation, data=data)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)
