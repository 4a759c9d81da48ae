"""The declaration of a node tool (`ToolSpec`) and the base of its parameter model.

A tool lives in its own folder (`tools/<name>/`) with a `spec.py` that declares one
`SPEC = ToolSpec(...)`; `tools.registry` lists the spec modules (one line per tool). Everything
else is generated from the spec: the `ncclbot node <name>` options (from the parameter model's
fields), the node agent's route and request model, the LLM's tool schema, Slack's help,
commands and buttons, the client's retry rule and the time a caller waits for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from tools.result import ToolResult

if TYPE_CHECKING:
    from rich.console import Console


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: The node agent's request models are strict: JSON `true` or `"5"` is not an integer.
STRICT = ConfigDict(extra="forbid", strict=True)
class ProbeProgress(BaseModel):
    """Where a long tool is: a probe's sweep, the slowest rank's step (`tools.probe.launch`).
    The agent's /v1/probe/status reports it; the CLI and Slack show it."""

    step: int = Field(description="1-based step the slowest rank is in; 0 while starting")
    steps: int = Field(description="collectives x message sizes")
    collective: str
    bytes: int
    ranks: int = Field(description="ranks that have started")


#: hears where a long tool is (a probe's sweep position, see `tools.probe.launch`)
Progress = Callable[[ProbeProgress], None]


@dataclass(frozen=True)
class RunContext:
    """What a tool's runner gets besides its parameters."""

    #: test-only fault spec (the probe's workers, `tools.probe.worker`); None in production
    fault: str | None = None
    progress: Progress | None = None


def findings_summary(result: ToolResult) -> str:
    """The default one-line summary: the error, the worst finding, or nothing to report."""
    if result.error:
        return result.error[:300]
    if result.findings:
        order = {"error": 0, "warn": 1, "info": 2}
        worst = sorted(result.findings, key=lambda f: order.get(f.severity, 3))[0]
        return f"{len(result.findings)} finding(s); first: {worst.message}"
    return "nothing to report"


def _no_render(result: ToolResult, console: Console) -> None:
    """Tools without a table of their own show only their findings."""


@dataclass(frozen=True)
class LlmTool:
    """How the LLM may call a tool on a named node: its tool name, the parameters it may set
    (their types, bounds and descriptions come from the model) and those always sent."""

    name: str
    fields: tuple[str, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class McpTool:
    """How a coding agent calls it over MCP (`bot.mcp.server`): its tool name, the parameters
    it may set (types, bounds and descriptions from the model; `defaults` where MCP's
    differ), and those naming a file on the server's machine (checked against the server's
    log roots when it runs there). A tool with presets is offered as `preset` instead (the
    enum of its presets); one that is not idempotent only on servers that allow probes."""

    name: str
    fields: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    """One node tool, declared once. Field docs say who reads each."""

    name: str
    #: what it does: the CLI help, the agent's route doc, Slack's help and the LLM's tool text
    description: str
    #: the one parameter model (bounded, nothing unknown accepted): CLI options, the LLM's
    #: schema and the agent's request model (strict) come from its fields
    params: type[Params]
    #: run(validated params, context) -> result; imports the heavy parts itself
    run: Callable[[Any, RunContext], ToolResult]
    #: what it needs on the node; said with every `unavailable` result, in the CLI help and
    #: to the LLM
    prerequisites: tuple[str, ...] = ()
    #: only on-call users may run it: the agent refuses others (Slack asks on call for every
    #: node tool); `oncall_why` completes "user X may not ..." in the refusal
    oncall: bool = False
    oncall_why: str = "run it"
    #: a read, safe to ask again: the client retries it after a dropped connection
    idempotent: bool = True
    #: seconds it may run on the node, from its validated parameters (its own limit where it
    #: has one); callers wait this plus the way back
    timeout: Callable[[Any], float] = field(default=lambda p: 60.0)
    #: the one-line summary (Slack's verdict line, the CLI's header)
    summary: Callable[[ToolResult], str] = findings_summary
    #: rich rendering of its data for the terminal: render(result, console)
    render: Callable[[ToolResult, Console], None] = _no_render
    #: the agent's request model when it is narrower than `params` (no files, no binaries);
    #: default: `params`, made strict
    request: type[Params] | None = None
    #: the agent runs one at a time per node (its own route: a lock, GPU check and `force`)
    exclusive: bool = False
    #: one at a time; an identical request joins the running one (the agent's single flight)
    single_flight: bool = False
    #: named parameter sets (the LLM proposes them, Slack's buttons and `/nccl NAME NODE
    #: [preset]` run them); the first is the default
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: how the LLM reads it on a named node (None: not offered to the LLM)
    llm: LlmTool | None = None
    #: how coding agents call it over MCP (None: not offered there)
    mcp: McpTool | None = None
    #: the model of its `ToolResult.data`, validated where a result is read back
    #: (`tools.registry.read_data`); None: read as plain JSON
    result: type[BaseModel] | None = None
    #: a command in `tools.cli` (False: the bot has its own, e.g. `hang` compares nodes)
    cli: bool = True
    #: reports progress while it runs (the agent's /v1/<name>/status)
    progress: bool = False
    #: one line for menus (Slack's help); default: the description's first clause
    title: str = ""
    #: Slack's usage after `/nccl NAME` (default: NODE and the presets)
    slack_args: str = ""

    @property
    def default_preset(self) -> str | None:
        return next(iter(self.presets), None)

    def request_model(self) -> type[Params]:
        """The body the node agent accepts: `request`, or the parameters made strict."""
        if self.request is not None:
            return self.request
        return _strict(self.params)

    @property
    def usage(self) -> str:
        """`/nccl NAME ...` words: NODE [preset|...], or the tool's own."""
        presets = f" [{'|'.join(self.presets)}]" if self.presets else ""
        return self.slack_args or "NODE" + presets

    @property
    def headline(self) -> str:
        return self.title or self.description.split(":")[0].split(". ")[0]

    def preset_text(self) -> str:
        """The presets in a line: `quick (backend=nccl, ...)`, for tool descriptions."""
        return "; ".join(f"{k}: " + ", ".join(f"{p}={v}" for p, v in params.items())
                         for k, params in self.presets.items())

    def prerequisite_text(self) -> str:
        return "needs " + "; ".join(self.prerequisites) if self.prerequisites else ""


_STRICT_MODELS: dict[type[Params], type[Params]] = {}


def _strict(model: type[Params]) -> type[Params]:
    if model not in _STRICT_MODELS:
        name = model.__name__.removesuffix("Params") + "Request"
        _STRICT_MODELS[model] = type(name, (model,), {"model_config": STRICT,
                                                      "__module__": model.__module__,
                                                      "__doc__": model.__doc__})
    return _STRICT_MODELS[model]
