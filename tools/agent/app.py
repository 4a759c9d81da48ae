"""The agent's FastAPI app: health plus one signed POST endpoint per diagnostic.

    GET  /health              liveness, no signature
    GET  /openapi.json        the schema, no signature
    POST /v1/topo|env|xid     run that tool (validated body) -> ToolResult
    POST /v1/probe            one probe at a time; 409 when busy or GPUs are in use
    POST /v1/probe/port       a free TCP port here, for a multi-node probe's rendezvous
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from tools.agent.audit import AuditLog
from tools.agent.auth import NonceCache, load_secret
from tools.agent.gpu import gpu_processes as nvml_gpu_processes
from tools.agent.guard import Guard
from tools.agent.locks import NodeBusyError, ProbeLock
from tools.agent.models import EnvRequest, PortReply, ProbeRequest, TopoRequest, XidRequest
from tools.result import ToolResult

VERSION = "1"
MAX_BODY_BYTES = 1 * 2**20
RunTool = Callable[[str, dict[str, Any]], ToolResult]
_BUSY = {409: {"description": "a probe is running here, or processes hold the GPUs"}}


def _default_run(tool: str, params: dict[str, Any]) -> ToolResult:
    from tools.registry import run_local

    return run_local(tool, params)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _validation_message(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    errors = [{"loc": [str(p) for p in e.get("loc", ()) if p != "body"], "msg": e.get("msg", "")}
              for e in exc.errors()]
    text = "; ".join(f"{'.'.join(e['loc']) or 'body'}: {e['msg']}" for e in errors)
    return f"invalid parameters: {text}", errors


def create_app(settings: Any = None, *, secret: bytes | None = None,
               audit_log: Path | None = None, force_users: Iterable[str] | None = None,
               gpu_processes: Callable[[], list[dict[str, Any]]] | None = None,
               run_tool: RunTool | None = None, max_body: int = MAX_BODY_BYTES) -> FastAPI:
    """Build the agent. `settings` needs agent_secret(_file), agent_audit_log, oncall_users.

    Explicit arguments win over settings; `gpu_processes` and `run_tool` are test seams.
    """
    if secret is None:
        value = getattr(settings, "agent_secret", None)
        secret = load_secret(value.get_secret_value() if value is not None else None,
                             getattr(settings, "agent_secret_file", None))
    audit = AuditLog(audit_log or getattr(settings, "agent_audit_log", None))
    allowed_force = frozenset(force_users if force_users is not None
                              else getattr(settings, "oncall_users", None) or ())
    list_gpu_procs = gpu_processes or nvml_gpu_processes
    run = run_tool or _default_run
    lock = ProbeLock()

    app = FastAPI(title="ncclbot node agent", version=VERSION, docs_url=None, redoc_url=None,
                  description="Signed requests only (see docs/agent.md); one probe at a time.")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, errors = _validation_message(exc)
        request.state.ncclbot_audit = {"outcome": "rejected", "reason": message[:500]}
        return JSONResponse({"detail": message, "errors": errors}, status_code=422)

    def _tool(request: Request, tool: str, params: dict[str, Any]) -> ToolResult:
        result = run(tool, params)
        request.state.ncclbot_audit = {"tool": tool, "params": params, "outcome": result.status,
                                       "error": (result.error or "")[:300] or None}
        return result

    @app.get("/health")
    def health() -> dict[str, Any]:
        """Liveness; unsigned."""
        return {"status": "ok", "service": "ncclbot-agent", "version": VERSION,
                "probe_busy": lock.holder is not None}

    @app.post("/v1/topo", response_model=ToolResult)
    def topo(body: TopoRequest, request: Request) -> ToolResult:
        """GPU/NIC topology of this node."""
        return _tool(request, "topo", body.model_dump(exclude_none=True))

    @app.post("/v1/env", response_model=ToolResult)
    def env(body: EnvRequest, request: Request) -> ToolResult:
        """Environment dump and lint of this node."""
        return _tool(request, "env", body.model_dump())

    @app.post("/v1/xid", response_model=ToolResult)
    def xid(body: XidRequest, request: Request) -> ToolResult:
        """Xid errors in dmesg or an allow-listed kernel log."""
        return _tool(request, "xid", body.model_dump(exclude_none=True))

    @app.post("/v1/probe/port", response_model=PortReply)
    def probe_port() -> PortReply:
        """A free TCP port on this node for a multi-node probe's rendezvous store."""
        return PortReply(port=_free_port())

    @app.post("/v1/probe", response_model=ToolResult, responses=_BUSY)
    def probe(body: ProbeRequest, request: Request) -> Any:
        """Collective sweep on this node, or this node's share of a multi-node probe."""
        user = request.state.ncclbot_user
        if body.force and user not in allowed_force:
            request.state.ncclbot_audit = {"outcome": "refused", "reason": "force not allowed"}
            return JSONResponse({"detail": f"user {user} may not force a probe; ask someone in "
                                 "the agent's force allow list (NCCLBOT_ONCALL_USERS)"}, 403)
        try:
            holder = lock.acquire(user)
        except NodeBusyError as exc:
            h = exc.holder
            request.state.ncclbot_audit = {"outcome": "busy", "holder": h.user}
            return JSONResponse({"detail": f"node busy: a probe by {h.user} since {h.since}",
                                 "reason": "probe_running", "holder": h.user,
                                 "since": h.since}, 409)
        try:
            procs = list_gpu_procs()
            if procs and not body.force:
                pids = sorted({p["pid"] for p in procs})
                request.state.ncclbot_audit = {"outcome": "refused", "reason": "gpus in use"}
                return JSONResponse({"detail": f"{len(pids)} process(es) hold the GPUs (pids "
                                     f"{', '.join(map(str, pids[:10]))}); not probing over a "
                                     "running job. An authorised user may pass force=true.",
                                     "reason": "gpus_in_use", "processes": procs[:64]}, 409)
            params = body.tool_params()
            if body.rendezvous is None:
                return _tool(request, "probe", params.model_dump())
            from tools.agent.group import run_group_member

            rv = body.rendezvous
            result = run_group_member(params, rv.master_addr, rv.master_port, rv.node_rank,
                                      rv.nnodes)
            request.state.ncclbot_audit = {
                "tool": "probe", "params": body.model_dump(exclude={"force"}),
                "outcome": result.status, "error": (result.error or "")[:300] or None,
                "since": holder.since, "forced": body.force}
            return result
        finally:
            lock.release()

    app.add_middleware(Guard, secret=secret, audit=audit, nonces=NonceCache(),
                       max_body=max_body)
    app.state.audit = audit
    return app
