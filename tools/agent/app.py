"""The agent's FastAPI app: health plus one signed POST endpoint per diagnostic.

    GET  /health              liveness, no signature; says only ok
    GET  /openapi.json        the schema, no signature
    POST /v1/<tool>           run that tool (its ToolSpec's request model) -> ToolResult;
                              on-call tools refuse others (403), single-flight ones run one
                              at a time and an identical request joins it (409 otherwise):
                              topo, env, xid, libs, hang (on call, single flight)
    POST /v1/probe            one probe at a time; 409 when busy or GPUs are in use
    POST /v1/probe/check      would a probe start now? 200, or the probe's 403/409
    POST /v1/probe/status     is a probe running, whose, and which step (k of N) it is in
    POST /v1/probe/port       a free TCP port here, for a multi-node probe's rendezvous
"""

from __future__ import annotations

import inspect
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from typing_extensions import TypedDict

from tools.agent.audit import AuditLog
from tools.agent.auth import NonceCache, load_secret
from tools.agent.door import Door, RefusalLog
from tools.agent.gpu import GpuProcess
from tools.agent.gpu import gpu_processes as nvml_gpu_processes
from tools.agent.guard import Guard, TargetCheck
from tools.agent.locks import Holder, NodeBusyError, ProbeLock
from tools.agent.models import (
    CheckReply,
    CheckRequest,
    PortReply,
    ProbeRequest,
    StatusReply,
)
from tools.hang.flight import SampleRunningError, SingleFlight, request_key
from tools.params import Params, Progress, ToolSpec
from tools.probe.worker import FAULT_ENV
from tools.registry import TOOLS
from tools.result import ToolResult

VERSION = "2"
MAX_BODY_BYTES = 1 * 2**20
#: Test-only: the agent passes NCCLBOT_PROBE_FAULT to its probes only when this is "1".
ALLOW_FAULTS_ENV = "NCCLBOT_AGENT_ALLOW_FAULTS"
#: run(tool, params[, on_progress=fn]) -> ToolResult; on_progress is passed for probes only.
RunTool = Callable[..., ToolResult]
_BUSY: dict[int | str, dict[str, Any]] = {
    409: {"description": "a probe is running here, or processes hold the GPUs"},
    403: {"description": "force asked by a user not in the force allow list"}}


def injected_fault(environ: Mapping[str, str], allow: bool | None = None) -> str | None:
    """The test-only fault spec the agent's probes get: NCCLBOT_PROBE_FAULT, but only when
    faults are allowed (`allow`, default NCCLBOT_AGENT_ALLOW_FAULTS=1); otherwise none."""
    if allow is None:
        allow = environ.get(ALLOW_FAULTS_ENV) == "1"
    return (environ.get(FAULT_ENV) or None) if allow else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


class Problem(TypedDict):
    """One invalid field of a request: where, and what is wrong."""

    loc: list[str]
    msg: str


def _validation_message(exc: RequestValidationError) -> tuple[str, list[Problem]]:
    errors = [Problem(loc=[str(p) for p in e.get("loc", ()) if p != "body"],
                      msg=str(e.get("msg", ""))) for e in exc.errors()]
    text = "; ".join(f"{'.'.join(e['loc']) or 'body'}: {e['msg']}" for e in errors)
    return f"invalid parameters: {text}", errors


def create_app(settings: object = None, *, secret: bytes | None = None,
               audit_log: Path | None = None, force_users: Iterable[str] | None = None,
               gpu_processes: Callable[[], list[GpuProcess]] | None = None,
               run_tool: RunTool | None = None, max_body: int = MAX_BODY_BYTES,
               names: Iterable[str] | None = None, allow_faults: bool | None = None) -> FastAPI:
    """Build the agent. `settings` needs agent_secret(_file), agent_audit_log, oncall_users.

    Explicit arguments win over settings; `gpu_processes` and `run_tool` are test seams.
    `names`: extra host names (or host:port) the bot may address this agent by (see
    `TargetCheck`). `allow_faults`: honour NCCLBOT_PROBE_FAULT (tests only; default from
    NCCLBOT_AGENT_ALLOW_FAULTS).
    """
    if secret is None:
        value = getattr(settings, "agent_secret", None)
        secret = load_secret(value.get_secret_value() if value is not None else None,
                             getattr(settings, "agent_secret_file", None))
    audit = AuditLog(audit_log or getattr(settings, "agent_audit_log", None))
    allowed_force = frozenset(force_users if force_users is not None
                              else getattr(settings, "oncall_users", None) or ())
    list_gpu_procs = gpu_processes or nvml_gpu_processes
    fault = injected_fault(os.environ, allow_faults)

    def default_run(tool: str, params: Mapping[str, object],
                    on_progress: Progress | None = None) -> ToolResult:
        from tools.registry import run_local

        return run_local(tool, params, fault=fault, on_progress=on_progress)

    run = run_tool or default_run
    lock = ProbeLock()
    targets = TargetCheck([*(names or ()), *(getattr(settings, "agent_names", None) or ())])

    app = FastAPI(title="ncclbot node agent", version=VERSION, docs_url=None, redoc_url=None,
                  description="Signed requests only (see docs/agent.md); one probe at a time.")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, errors = _validation_message(exc)
        request.state.ncclbot_audit = {"outcome": "rejected", "reason": message[:500]}
        return JSONResponse({"detail": message, "errors": errors}, status_code=422)

    def _tool(request: Request, tool: str, params: dict[str, object]) -> ToolResult:
        result = run(tool, params, on_progress=lock.report) if tool == "probe" else run(
            tool, params)
        request.state.ncclbot_audit = {"tool": tool, "params": params, "outcome": result.status,
                                       "error": (result.error or "")[:300] or None}
        return result

    def force_refusal(request: Request, force: bool) -> JSONResponse | None:
        """403 when `force` is asked by a user not in the force allow list."""
        user = request.state.ncclbot_user
        if not force or user in allowed_force:
            return None
        request.state.ncclbot_audit = {"outcome": "refused", "reason": "force not allowed"}
        return JSONResponse({"detail": f"user {user} may not force a probe; ask someone in "
                             "the agent's force allow list (NCCLBOT_ONCALL_USERS)",
                             "reason": "force_not_allowed"}, 403)

    def gpus_refusal(request: Request, force: bool) -> JSONResponse | None:
        """409 when processes hold the GPUs and the probe is not forced."""
        procs = list_gpu_procs()
        if not procs or force:
            return None
        held = sorted({p["pid"] for p in procs})
        request.state.ncclbot_audit = {"outcome": "refused", "reason": "gpus in use"}
        return JSONResponse({"detail": f"{len(held)} process(es) hold the GPUs (pids "
                             f"{', '.join(map(str, held[:10]))}); not probing over a "
                             "running job. An authorised user may pass force=true.",
                             "reason": "gpus_in_use", "processes": procs[:64]}, 409)

    def busy_refusal(request: Request, holder: Holder) -> JSONResponse:
        request.state.ncclbot_audit = {"outcome": "busy", "holder": holder.user}
        return JSONResponse({"detail": f"node busy: a probe by {holder.user} since "
                             f"{holder.since}", "reason": "probe_running",
                             "holder": holder.user, "since": holder.since}, 409)

    @app.get("/health")
    def health() -> dict[str, str]:
        """Liveness; unsigned, so it says nothing about probes or users."""
        return {"status": "ok"}

    flights: dict[str, SingleFlight[ToolResult]] = {}

    def add_tool_route(spec: ToolSpec) -> None:
        """`POST /v1/<name>` for a tool, from its ToolSpec: its request model, on-call rule
        and single flight (one at a time; an identical request joins the running one)."""
        responses: dict[int | str, dict[str, Any]] = {}
        if spec.oncall:
            responses[403] = {"description": "the user is not on call (NCCLBOT_ONCALL_USERS)"}
        if spec.single_flight:
            responses[409] = {"description": f"another {spec.name} runs here"}
            flights[spec.name] = SingleFlight()

        def route(body: Params, request: Request) -> ToolResult | JSONResponse:
            user = request.state.ncclbot_user
            if spec.oncall and user not in allowed_force:
                request.state.ncclbot_audit = {"tool": spec.name, "outcome": "refused",
                                               "reason": "not on call"}
                return JSONResponse({"detail": f"user {user} may not {spec.oncall_why} on "
                                     f"this node; the {spec.name} diagnostic is for on-call "
                                     "users (NCCLBOT_ONCALL_USERS)", "reason": "not_on_call"},
                                    403)
            if not spec.single_flight:
                return _tool(request, spec.name, body.model_dump(exclude_none=True))
            params = body.model_dump()
            try:
                result, joined = flights[spec.name].run(
                    request_key(params), user, lambda: run(spec.name, params),
                    spec.timeout(body))
            except SampleRunningError as exc:
                request.state.ncclbot_audit = {"tool": spec.name, "outcome": "busy",
                                               "holder": exc.user, "reason": exc.why}
                return JSONResponse({"detail": f"{exc.why} (asked by {exc.user} since "
                                     f"{exc.since}); ask again when it is done",
                                     "reason": f"{spec.name}_running", "holder": exc.user,
                                     "since": exc.since}, 409)
            request.state.ncclbot_audit = {"tool": spec.name, "params": params,
                                           "outcome": result.status, "joined": joined,
                                           "error": (result.error or "")[:300] or None}
            return result

        route.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
            inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation=spec.request_model()),
            inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation=Request)])
        route.__name__ = spec.name
        app.post(f"/v1/{spec.name}", response_model=ToolResult, responses=responses,
                 description=spec.description, summary=spec.name)(route)

    for spec in TOOLS.values():
        if not spec.exclusive:  # the GPU-exclusive probe has its own routes below
            add_tool_route(spec)

    @app.post("/v1/probe/port", response_model=PortReply)
    def probe_port() -> PortReply:
        """A free TCP port on this node for a multi-node probe's rendezvous store."""
        return PortReply(port=_free_port())

    @app.post("/v1/probe/check", response_model=CheckReply, responses=_BUSY)
    def probe_check(body: CheckRequest, request: Request) -> CheckReply | JSONResponse:
        """Whether a probe by this user (with `force`) would start now; nothing is run."""
        holder = lock.holder
        refused = force_refusal(request, body.force) or (
            busy_refusal(request, holder) if holder is not None else None) or gpus_refusal(
            request, body.force)
        if refused is None:
            request.state.ncclbot_audit = {"tool": "probe_check", "outcome": "ready"}
        return refused or CheckReply(ready=True)

    @app.post("/v1/probe/status", response_model=StatusReply)
    def probe_status(request: Request) -> StatusReply:
        """Whether a probe runs here, for whom since when, and how far its sweep has got."""
        holder, progress = lock.holder, lock.progress
        request.state.ncclbot_audit = {"tool": "probe_status",
                                       "outcome": "running" if holder else "idle"}
        if holder is None:
            return StatusReply(running=False)
        return StatusReply(running=True, holder=holder.user, since=holder.since,
                           progress=progress)

    @app.post("/v1/probe", response_model=ToolResult, responses=_BUSY)
    def probe(body: ProbeRequest, request: Request  # TOOLS["probe"].request
              ) -> ToolResult | JSONResponse:
        """Collective sweep on this node, or this node's share of a multi-node probe."""
        if (refused := force_refusal(request, body.force)) is not None:
            return refused
        try:
            holder = lock.acquire(request.state.ncclbot_user)
        except NodeBusyError as exc:
            return busy_refusal(request, exc.holder)
        try:
            if (refused := gpus_refusal(request, body.force)) is not None:
                return refused
            params = body.tool_params()
            if body.rendezvous is None:
                return _tool(request, "probe", params.model_dump())
            from tools.probe.group import run_group_member

            result = run_group_member(params, body.rendezvous, fault=fault,
                                      on_progress=lock.report)
            request.state.ncclbot_audit = {
                "tool": "probe", "params": body.model_dump(exclude={"force"}),
                "outcome": result.status, "error": (result.error or "")[:300] or None,
                "since": holder.since, "forced": body.force}
            return result
        finally:
            lock.release()

    # the connection layer (server.py's protocol) and the Guard share one door
    door = Door(refusals=RefusalLog(audit.write))
    app.add_middleware(Guard, secret=secret, audit=audit, nonces=NonceCache(),
                       max_body=max_body, targets=targets, started=time.time(), door=door)
    app.state.audit = audit
    app.state.door = door
    return app
