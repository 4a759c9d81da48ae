"""The node tools: one line per tool naming its spec module (`tools/<name>/spec.py`, which
declares `SPEC = ToolSpec(...)`, see `tools.params`). The CLI, the node agent, the LLM's
tools, Slack and the cards' probe names all read `TOOLS`; `run_local` validates a request
and runs it here. Importing this imports no tool's heavy parts (their runners do).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import cast

from pydantic import BaseModel, ValidationError

from tools.params import Params, Progress, RunContext, ToolSpec
from tools.result import ToolResult

#: Add a node diagnostic: write tools/<name>/spec.py and add its module here.
SPEC_MODULES = (
    "tools.topo.spec",
    "tools.env.spec",
    "tools.probe.spec",
    "tools.xid.spec",
    "tools.hang.spec",
    "tools.libs.spec",
)

TOOLS: dict[str, ToolSpec] = {
    s.name: s for s in (cast(ToolSpec, import_module(m).SPEC) for m in SPEC_MODULES)}
#: reads, retried by the node client after a dropped connection
READ_TOOLS: tuple[str, ...] = tuple(n for n, s in TOOLS.items() if s.idempotent)


def validate(tool: str, params: Mapping[str, object] | None) -> Params:
    """The validated parameter model; KeyError for unknown tools, ValidationError on bad input."""
    return TOOLS[tool].params.model_validate(dict(params or {}))


def default_preset(tool: str) -> str:
    """The preset a tool runs with when none is named ("" for tools without presets)."""
    spec = TOOLS.get(tool)
    return (spec.default_preset or "") if spec is not None else ""


def preset_params(tool: str, preset: str | None) -> dict[str, object]:
    """The parameters of `tool`'s `preset` (its default when None); ValueError for an unknown
    preset, {} for a tool without presets."""
    spec = TOOLS[tool]
    if not spec.presets:
        return {}
    name = preset or default_preset(tool)
    if name not in spec.presets:
        raise ValueError(f"unknown {tool} preset {name!r}; use one of: "
                         f"{', '.join(spec.presets)}")
    return dict(spec.presets[name])


def tool_timeout(tool: str, params: Mapping[str, object] | None) -> float:
    """Seconds `tool` may run on a node with `params` (its spec's; the default parameters'
    when these do not validate, as the node will refuse them at once)."""
    spec = TOOLS[tool]
    try:
        p = spec.request_model().model_validate(dict(params or {}), strict=False)
    except ValidationError:
        p = spec.params()
    return float(spec.timeout(p))


def summarise(tool: str, result: ToolResult | Mapping[str, object]) -> str:
    """The tool's one-line summary of its result."""
    r = result if isinstance(result, ToolResult) else ToolResult.model_validate(dict(result))
    spec = TOOLS.get(tool)
    if spec is None:
        return r.error or r.status
    return spec.summary(r)


def read_data(tool: str, result: ToolResult) -> BaseModel | None:
    """A result's data read through its tool's `result` model (None: the tool declares
    none); ValidationError when the data does not fit it."""
    model = TOOLS[tool].result if tool in TOOLS else None
    return model.model_validate(result.data) if model is not None else None


def run_local(tool: str, params: Mapping[str, object] | None = None, *,
              fault: str | None = None, on_progress: Progress | None = None) -> ToolResult:
    """Validate and run one tool on this node. Never raises: bad input is an error result.

    `fault`: a test-only fault spec for the probe's workers (`tools.probe.worker`).
    `on_progress`: hears where a long tool is (a probe's sweep position).
    An `unavailable` result says what the tool needs (its spec's prerequisites).
    """
    invocation = f"{tool} {dict(params or {})}"
    if tool not in TOOLS:
        return ToolResult.failed(tool, invocation,
                                 f"unknown tool {tool!r}; known: {', '.join(TOOLS)}")
    spec = TOOLS[tool]
    try:
        p = validate(tool, params)
    except ValidationError as exc:
        return ToolResult.failed(tool, invocation, f"invalid parameters: {exc}")
    try:
        result = spec.run(p, RunContext(fault=fault, progress=on_progress))
    except Exception as exc:  # noqa: BLE001 - a tool bug must still come back as a result
        return ToolResult.failed(tool, invocation, f"{type(exc).__name__}: {exc}")
    if result.status == "unavailable" and spec.prerequisites and result.error and \
            "needs " not in result.error:
        result = result.model_copy(update={
            "error": f"{result.error} ({spec.prerequisite_text()})"})
    return result
