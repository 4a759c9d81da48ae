"""The MCP server: `Backend`'s methods as typed tools, cards and incidents as resources.

Built on the `mcp` SDK's `MCPServer` (the `mcp` extra); `serve` runs it over stdio, or
over streamable HTTP at `http://HOST:PORT/mcp` behind `auth.BearerAuth`.
(No `from __future__ import annotations`: the SDK reads the tools' annotations at run time.)
"""

import inspect
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.types import ToolAnnotations
from pydantic import Field

from bot.answering.contract import Answer
from bot.errors import NcclbotError
from bot.mcp.backend import AnswerLang, AskLang, Backend, LogText, SimilarIncidents
from tools.params import McpTool, ToolSpec
from tools.registry import TOOLS
from tools.result import ToolResult

log = logging.getLogger("ncclbot.mcp")

SKILL = Path(__file__).with_name("SKILL.md")
INSTRUCTIONS = (
    "ncclbot troubleshoots NCCL and distributed-training failures. Call analyze_logs first "
    "with every rank's log (paths, or text in `logs`; Flight Recorder dumps too): it names "
    "the root cause, the suspect rank/host and the evidence lines. Then ask (the question, "
    "with the same logs) for the deciding evidence and what to check next; get_card and the "
    "ncclbot://cards/{id} resources give the full fix with sources to cite. Use node_* "
    "diagnostics on the suspect node last. Read ncclbot://skill for the whole guide.")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
NODE_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=True)
PROBE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                        open_world_hint=True)

Paths = Annotated[list[str] | None, Field(
    description="log files on the server's machine (.log .txt .gz .zip) or a job's folder "
    "(its logs and Flight Recorder dumps)", max_length=1000)]
Logs = Annotated[list[LogText] | None, Field(
    description="logs passed as text, each with a file name", max_length=1000)]
Nodes = Annotated[list[str] | None, Field(
    max_length=64, description="nodes or groups of the inventory to sample and compare; omit "
    "for the server's own machine")]
Lang = Annotated[AnswerLang, Field(description="answer language")]
Node = Annotated[str | None, Field(
    description="a node of the inventory (NCCLBOT_NODES_FILE), run through its signed agent; "
    "omit to run on the server's own machine", max_length=128)]


def build_server(backend: Backend) -> MCPServer:
    """The MCP server over `backend`; its node tools come from the ToolSpecs that declare
    an `McpTool` (tools that are not idempotent, the probe, only when probes are allowed)."""
    server: MCPServer = MCPServer("ncclbot", title="ncclbot", version=_version(),
                                  instructions=INSTRUCTIONS)

    @server.tool(annotations=READ_ONLY)
    def analyze_logs(paths: Paths = None, logs: Logs = None,
                     lang: Annotated[AnswerLang, Field(description="answer language")] = "both"
                     ) -> Answer:
        """Analyze crash logs of a distributed job (every rank's, any launcher; .gz, .zip,
        folders and Flight Recorder dumps too): ranked root causes with file:line evidence,
        the suspect rank and host, remediation, cited cards and similar past incidents. The
        same JSON as `ncclbot analyze --json`."""
        return backend.analyze_logs(paths, logs, lang)

    @server.tool(annotations=READ_ONLY)
    def ask(question: Annotated[str, Field(min_length=1, max_length=20_000,
                                           description="the question, English or Chinese")],
            paths: Paths = None, logs: Logs = None,
            lang: Annotated[AskLang, Field(description="en, zh, both, or auto (the "
                                           "question's language)")] = "both") -> Answer:
        """Answer a question about an NCCL / distributed-training failure, with the logs when
        given: the root causes, the retrieved cards (and why), and for a vague question
        `next_steps`: the evidence that would tell the candidates apart. The same JSON as
        `ncclbot ask --json`."""
        return backend.ask(question, paths, logs, lang)

    @server.tool(annotations=READ_ONLY)
    def search_knowledge(query: Annotated[str, Field(min_length=1, max_length=2000,
                                                     description="symptoms, error text or "
                                                     "a question")]) -> ToolResult:
        """Search the curated incident cards (hybrid: keywords, embeddings, signatures):
        card ids with title, category, root cause and why each matched."""
        return backend.search_knowledge(query)

    @server.tool(annotations=READ_ONLY)
    def get_card(card_id: Annotated[str, Field(min_length=1, max_length=200,
                                               description="a card id from another tool")],
                 lang: Annotated[AnswerLang, Field(description="zh adds the Chinese steps")]
                 = "en") -> ToolResult:
        """One incident card: symptoms, root cause, numbered remediation steps, how to
        verify the fix, probes and sources to cite."""
        return backend.get_card(card_id, lang)

    @server.tool(annotations=READ_ONLY)
    def similar_incidents(question: Annotated[str | None, Field(
                              max_length=20_000, description="a question or symptoms")] = None,
                          paths: Paths = None, logs: Logs = None) -> SimilarIncidents:
        """Past public incidents (GitHub threads) like these logs or this question, with the
        confirmed cause and what fixed it."""
        return backend.similar_incidents(question, paths, logs)

    for spec in TOOLS.values():
        if spec.mcp is not None and (spec.idempotent or backend.policy.allow_probes):
            _node_tool(server, backend, spec, spec.mcp)
    _resources(server, backend)
    return server


def _spec_fields(spec: ToolSpec, mcp: McpTool) -> list[inspect.Parameter]:
    """The parameters the spec offers over MCP, typed and bounded by its parameter model."""
    out = []
    for name in mcp.fields:
        f = spec.params.model_fields[name]
        default = mcp.defaults.get(name, f.get_default(call_default_factory=True))
        annotation: Any = Annotated[  # built from the model
            (f.annotation, *f.metadata, Field(description=f.description))]
        out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                     annotation=annotation))
    return out


def _node_tool(server: MCPServer, backend: Backend, spec: ToolSpec, mcp: McpTool) -> None:
    """Register one node tool from its ToolSpec: `node` (or `nodes` for the compared
    `hang`), the fields its `McpTool` names, or `preset` for a tool with presets."""
    kw = inspect.Parameter.KEYWORD_ONLY
    need = spec.prerequisite_text()
    where = "[--nodes A,B]" if spec.name == "hang" else "[--node NAME]"
    text = (f"{spec.description} As `ncclbot node {spec.name} {where}`"
            + (f"; it {need}." if need else "."))
    fields = _spec_fields(spec, mcp)

    def call(**kw_args: Any) -> ToolResult:
        node = kw_args.pop("node", None)
        if spec.presets:
            return backend.node_preset(spec.name, node, kw_args["preset"])
        params = {k: v for k, v in kw_args.items() if v is not None}
        for name in mcp.paths:
            if name in params and node is None:
                try:
                    params[name] = backend.check_path(params[name])
                except NcclbotError as exc:
                    return ToolResult.failed(spec.name, f"node {spec.name} --{name} "
                                             f"{params[name]}", exc.message)
        return backend.node_tool(spec.name, node, params)

    def compare(**kw_args: Any) -> Answer:
        nodes, lang = kw_args.pop("nodes"), kw_args.pop("lang")
        return backend.node_hang(nodes, {k: v for k, v in kw_args.items() if v is not None},
                                 lang)

    if spec.name == "hang":  # several nodes' samples, compared into one answer
        fn: Any = compare
        head = [inspect.Parameter("nodes", kw, default=None, annotation=Nodes)]
        tail = [inspect.Parameter("lang", kw, default="both", annotation=Lang)]
        returns: type = Answer
    else:
        fn, head, tail, returns = call, [inspect.Parameter("node", kw, default=None,
                                                           annotation=Node)], [], ToolResult
        if spec.presets:
            fields = [inspect.Parameter("preset", kw, annotation=Annotated[
                str, Field(json_schema_extra={"enum": list(spec.presets)},
                           description=f"a bounded {spec.name} preset: {spec.preset_text()}")])]
    fn.__signature__ = inspect.Signature([*head, *fields, *tail], return_annotation=returns)
    fn.__name__ = mcp.name
    server.add_tool(fn, name=mcp.name, description=text,
                    annotations=NODE_READ if spec.idempotent else PROBE)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ncclbot")
    except PackageNotFoundError:
        return "0"


def _resources(server: MCPServer, backend: Backend) -> None:
    @server.resource("ncclbot://cards", name="cards", mime_type="application/json",
                     description="every incident card: id, category, title, uri")
    def cards() -> str:
        return backend.card_index()

    @server.resource("ncclbot://cards/{card_id}", name="card", mime_type="application/json",
                     description="one incident card (both languages, sources to cite)")
    def card(card_id: str) -> str:
        text = backend.card_json(card_id)
        if text is None:
            raise ResourceNotFoundError(f"no card {card_id!r}; list them at ncclbot://cards")
        return text

    @server.resource("ncclbot://incidents", name="incidents", mime_type="application/json",
                     description="the corpus of real public incidents: id, category, title")
    def incidents() -> str:
        return backend.incident_index()

    @server.resource("ncclbot://incidents/{incident_id}", name="incident",
                     mime_type="application/json",
                     description="one real incident: the reporter's log, confirmed cause, fix")
    def incident(incident_id: str) -> str:
        text = backend.incident_json(incident_id)
        if text is None:
            raise ResourceNotFoundError(f"no incident {incident_id!r}; list them at "
                                        "ncclbot://incidents")
        return text

    @server.resource("ncclbot://skill", name="skill", mime_type="text/markdown",
                     description="how an agent should use these tools, in order")
    def skill() -> str:
        return SKILL.read_text(encoding="utf-8")


def serve(backend: Backend, *, http: bool = False, host: str = "127.0.0.1", port: int = 8471,
          token: str | None = None) -> None:
    """Run until stopped: stdio, or streamable HTTP at http://HOST:PORT/mcp (401 without
    `token` when one is set)."""
    server = build_server(backend)
    if not http:
        if sys.stdin.isatty():
            sys.stderr.write("ncclbot MCP server on stdio: an MCP client (Claude Code, Cursor, "
                             "HolmesGPT) starts this command and talks JSON-RPC on stdin; see "
                             "docs/mcp.md. Ctrl-C to stop.\n")
        server.run("stdio")
        return
    import uvicorn

    from bot.mcp.auth import BearerAuth

    app: Any = server.streamable_http_app(host=host)
    if token is not None:
        app = BearerAuth(app, token)
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"ncclbot MCP server on http://{shown}:{port}/mcp "
                     f"({'bearer token required' if token else 'no token: loopback only'})\n")
    sys.stderr.flush()
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
