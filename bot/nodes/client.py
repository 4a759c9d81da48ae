"""A signed HTTP client for one node agent, with timeouts and bounded retries for reads.

Every failure is a NodeError that says what happened and what to do next: unreachable
agent, authentication refused, busy node (who and since when), timeout, bad parameters.
`transport` is the one seam for tests (an httpx transport); real tests use a local agent.
"""

from __future__ import annotations

import getpass
import json
import ssl
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from bot.errors import NodeError
from bot.nodes.inventory import Node
from tools.agent.auth import load_secret, signed_headers
from tools.agent.models import PortReply
from tools.registry import READ_TOOLS, TOOLS
from tools.result import ToolResult

if TYPE_CHECKING:
    from bot.config import Settings

RETRY_STATUS = (502, 503, 504)
#: a JSON object as an agent sends it (read through the agent's reply models)
Json = dict[str, object]


class AgentError(NodeError):
    """A NodeError from one agent; `kind` says which: unreachable, timeout, auth, refused,
    busy, rejected, http, malformed."""

    def __init__(self, message: str, hint: str | None = None, *, kind: str = "http",
                 node: str = "", status: int | None = None,
                 body: Mapping[str, object] | None = None) -> None:
        super().__init__(message, hint)
        self.kind, self.node, self.status = kind, node, status
        #: the agent's JSON reply (its `detail`, `reason`, `holder`, ...)
        self.body: Mapping[str, object] = body or {}


class NodeBusyError(AgentError):
    """409: a probe is running there (`holder`, `since`) or processes hold its GPUs."""


def cli_user() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli:unknown"


class NodeClient:
    """Talks to the agent of one node. Use as a context manager, or call close()."""

    def __init__(self, node: Node, secret: bytes, user: str, *, timeout: float = 30.0,
                 retries: int = 2, backoff_s: float = 0.3, verify: ssl.SSLContext | bool = True,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.node, self.secret, self.user = node, secret, user
        self.timeout, self.retries, self.backoff_s = timeout, retries, backoff_s
        self._http = httpx.Client(base_url=node.url, verify=verify, transport=transport,
                                  timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)))

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- public calls -----------------------------------------------------------
    def health(self) -> Json:
        return self._call("GET", "/health", None, idempotent=True, signed=False)

    def run(self, tool: str, params: Mapping[str, object] | None = None,
            timeout: float | None = None) -> ToolResult:
        """Run one tool there; reads (`ToolSpec.idempotent`) are retried, probes never. A
        single-flight tool (hang) is not asked again after a timeout (it has used its whole
        deadline there; the agent runs one at a time and an identical request joins the
        running one, so the other retries are safe). Use `bot.nodes.runner.NodeRunner`, which
        waits as long as the tool's spec says."""
        body = {k: v for k, v in (params or {}).items() if v is not None}
        spec = TOOLS.get(tool)
        data = self._call("POST", f"/v1/{tool}", body, idempotent=tool in READ_TOOLS,
                          timeout=timeout,
                          retry_timeout=not (spec is not None and spec.single_flight))
        try:
            return ToolResult.model_validate(data)
        except ValueError as exc:
            raise self._error(f"agent on {self.node.name} sent a malformed result: {exc}",
                              "malformed") from exc

    def probe_port(self) -> int:
        reply = self._call("POST", "/v1/probe/port", {}, idempotent=False)
        try:
            return PortReply.model_validate(reply).port
        except ValueError as exc:
            raise self._error(f"agent on {self.node.name} sent no port: {exc}",
                              "malformed") from exc

    def probe_check(self, force: bool = False) -> None:
        """Return when a probe (with `force`) would start there now; NodeBusyError when a
        probe runs or processes hold the GPUs, AgentError(kind="refused") for 403."""
        self._call("POST", "/v1/probe/check", {"force": force}, idempotent=True)

    def probe_status(self) -> Json:
        """{running, holder, since, progress: {step, steps, collective, bytes, ranks}}."""
        return self._call("POST", "/v1/probe/status", {}, idempotent=True)

    # -- plumbing ---------------------------------------------------------------
    def _call(self, method: str, path: str, body: Mapping[str, object] | None, *,
              idempotent: bool, signed: bool = True, timeout: float | None = None,
              retry_timeout: bool = True) -> Json:
        payload = json.dumps(body).encode() if body is not None else b""
        attempts = 1 + (self.retries if idempotent else 0)
        for attempt in range(attempts):
            request = self._http.build_request(
                method, path, content=payload or None,
                headers={"Content-Type": "application/json"} if body is not None else {},
                timeout=timeout or httpx.USE_CLIENT_DEFAULT)
            if signed:  # bound to this node: the Host header is inside the signature
                request.headers.update(signed_headers(self.secret, method,
                                                      request.headers["host"], path, payload,
                                                      self.user))
            try:
                resp = self._http.send(request)
            except httpx.TimeoutException as exc:
                if attempt + 1 < attempts and retry_timeout:
                    time.sleep(self.backoff_s * 2**attempt)
                    continue
                raise self._error(
                    f"agent on {self.node.name} ({self.node.url}) timed out after "
                    f"{timeout or self.timeout:g} s ({type(exc).__name__})", "timeout",
                    hint="The node may be overloaded or the request too big; retry with a "
                    "smaller probe, or check the agent's audit log.") from exc
            except httpx.TransportError as exc:
                if attempt + 1 < attempts:
                    time.sleep(self.backoff_s * 2**attempt)
                    continue
                raise self._error(
                    f"agent on {self.node.name} ({self.node.url}) is unreachable: {exc}",
                    "unreachable", hint="Is `ncclbot serve agent` running there, and is the "
                    "port open from the bot? Check the url in NCCLBOT_NODES_FILE.") from exc
            if resp.status_code in RETRY_STATUS and attempt + 1 < attempts:
                time.sleep(self.backoff_s * 2**attempt)
                continue
            return self._decode(resp)
        raise AssertionError("unreachable")

    def _error(self, message: str, kind: str, hint: str | None = None,
               status: int | None = None, body: Mapping[str, object] | None = None
               ) -> AgentError:
        cls = NodeBusyError if kind == "busy" else AgentError
        return cls(message, hint, kind=kind, node=self.node.name, status=status, body=body)

    def _decode(self, resp: httpx.Response) -> Json:
        try:
            data = resp.json()
        except ValueError:
            data = {"detail": resp.text[:300]}
        if resp.status_code == 200 and isinstance(data, dict):
            return data
        body: Json = data if isinstance(data, dict) else {}
        detail = body.get("detail") if body else str(data)
        name, code = self.node.name, resp.status_code
        if code == 401:
            raise self._error(f"agent on {name} refused authentication: {detail}", "auth",
                              hint="NCCLBOT_AGENT_SECRET (or _FILE) must be the same on the "
                              "bot and the agent, both clocks within 5 minutes (NTP), and the "
                              "url in NCCLBOT_NODES_FILE an address the agent knows as its own "
                              "(its --name).", status=code, body=body)
        if code == 403:
            raise self._error(f"agent on {name} refused: {detail}", "refused", status=code,
                              body=body)
        if code == 409:
            raise self._error(f"node {name} is busy: {detail}", "busy", hint="Wait for the "
                              "running probe or job to finish, or ask its owner; an on-call "
                              "user may pass --force over GPUs in use.", status=code, body=body)
        if code in (413, 422):
            raise self._error(f"agent on {name} rejected the request: {detail}", "rejected",
                              hint="Stay within the documented parameter bounds.",
                              status=code, body=body)
        raise self._error(f"agent on {name} answered HTTP {code}: {detail}", "http",
                          hint="Check the agent's log and audit log on the node.", status=code,
                          body=body)


def tls_context(settings: Settings) -> ssl.SSLContext | bool:
    """Verify agents with NCCLBOT_AGENT_CA_FILE; present agent_tls_cert/key for mutual TLS."""
    ca, cert, key = settings.agent_ca_file, settings.agent_tls_cert, settings.agent_tls_key
    if ca is None and cert is None:
        return True
    ctx = ssl.create_default_context(cafile=str(ca) if ca else None)
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key) if key else None)
    return ctx


def client_for(settings: Settings, node: Node, user: str | None = None, *,
               transport: httpx.BaseTransport | None = None, timeout: float = 30.0) -> NodeClient:
    """A client for `node` from the settings (secret, TLS)."""
    value = settings.agent_secret
    try:
        secret = load_secret(value.get_secret_value() if value is not None else None,
                             settings.agent_secret_file)
    except ValueError as exc:
        raise NodeError(str(exc), hint="The bot signs agent requests with the same secret "
                        "the agents use.") from exc
    return NodeClient(node, secret, user or cli_user(), timeout=timeout,
                      verify=tls_context(settings), transport=transport)
