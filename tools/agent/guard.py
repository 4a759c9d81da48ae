"""ASGI middleware in front of every endpoint: body size limit, signature check, audit line.

It refuses a request whose signature headers are missing, malformed or stale before
reading its body; reads the (bounded) body itself within its lane's time (`Door.admit`:
a few slow requests per address, then only small bodies sent at once); verifies the HMAC
(which covers the Host the client addressed) before any parsing, checks that Host names
this agent, and replays the body to the app. Every allowed request gets one audit line;
every refusal is counted, and written in full at a bounded rate per address or user,
with a summary line for the rest (`RefusalLog`).
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.responses import JSONResponse

from tools.agent.audit import AuditLog
from tools.agent.auth import START_SKEW_S, AuthError, NonceCache, precheck, verify
from tools.agent.door import Door, RefusalLog
from tools.netaddr import is_loopback_ip

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Reachable without a signature (GET only).
PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})


class TooLargeError(Exception):
    pass


#: A Host header: a name or address and an optional port, nothing else (no userinfo).
_AUTHORITY = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$")
#: Statuses by which the app refuses a verified request (not on call, busy, invalid, too
#: many): audited through the rate-bounded refusal log like the Guard's own denials.
REFUSALS = frozenset({401, 403, 409, 413, 422, 429})
#: Longest value of one audit field.
AUDIT_FIELD_MAX = 200


def _split(authority: str) -> tuple[str, int | None] | None:
    if not _AUTHORITY.match(authority):
        return None
    try:
        parts = urlsplit("//" + authority)
        return (parts.hostname or "", parts.port)
    except ValueError:
        return None


class TargetCheck:
    """Whether the Host a request was signed for names this agent.

    Yes when it is one of `names` (`host` or `host:port`, e.g. the inventory's address
    behind a proxy), or when its port is the one the connection arrived on and its host
    is the local address of that connection, this machine's host name, or `localhost`
    on a loopback connection.
    """

    def __init__(self, names: Iterable[str] = (), hostnames: Iterable[str] | None = None) -> None:
        self.names = {n.strip().lower() for n in names if n.strip()}
        if hostnames is None:
            hostnames = {socket.gethostname(), socket.getfqdn()}
        self.hostnames = {h.lower() for h in hostnames if h}

    def __call__(self, target: str, server: tuple[str, int] | None, scheme: str) -> bool:
        target = target.strip().lower()
        split = _split(target)
        if not target or split is None:
            return False
        host, port = split
        if target in self.names or host in self.names:
            return True
        if not server:
            return False
        local_host, local_port = server[0].lower(), int(server[1])
        if (port or {"http": 80, "https": 443}.get(scheme)) != local_port:
            return False
        return (host == local_host or host in self.hostnames
                or (host == "localhost" and is_loopback_ip(local_host)))


class Guard:
    """Bounds, verifies and audits every request (see the module docstring); `door` is the
    connection layer's state (`tools.agent.door`), shared with the server's protocol."""

    def __init__(self, app: ASGIApp, *, secret: bytes, audit: AuditLog, nonces: NonceCache,
                 max_body: int, targets: TargetCheck | None = None,
                 started: float | None = None, door: Door | None = None) -> None:
        self.app, self.secret, self.audit = app, secret, audit
        self.nonces, self.max_body = nonces, max_body
        self.targets = targets or TargetCheck()
        self.not_before = (time.time() if started is None else started) - START_SKEW_S
        self.door = door or Door(refusals=RefusalLog(audit.write))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.monotonic()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        method, path = scope["method"], scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        remote = str((scope.get("client") or ("?", 0))[0])
        # until the signature is checked, the user is only what the request claims
        record: dict[str, object] = {
            "method": method, "path": path, "user": None,
            "claimed_user": headers.get("x-ncclbot-user"), "remote": remote}
        status = {"code": 0}
        audited = {"done": False}

        def finish() -> None:
            """Account for the request once: one audit line when it was allowed (before its
            last byte goes out, so a client that has the answer also finds the line); a
            refusal through the rate-bounded refusal log."""
            if not audited["done"]:
                audited["done"] = True
                record.update(scope.get("state", {}).get("ncclbot_audit", {}))
                self._audit(record, status, start)

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finish()
            await send(message)

        async def deny(code: int, reason: str) -> None:
            await self._deny(scope, receive, send_wrapper, code, reason, record)
            finish()

        public = method == "GET" and path in PUBLIC_PATHS
        if not public:
            try:  # no body is read for a request that cannot be signed
                precheck(headers, not_before=self.not_before)
            except AuthError as exc:
                await deny(401, str(exc))
                return
        length_text = headers.get("content-length", "").strip()
        length = int(length_text) if length_text.isdigit() and len(length_text) < 19 else None
        if length is None and not length_text and "transfer-encoding" not in headers:
            length = 0  # HTTP/1.1: neither header, no body (a GET)
        if length is not None and length > self.max_body:
            await deny(413, f"request body over {self.max_body} bytes")
            return
        lane = self.door.admit(remote, length)
        if lane is None:
            await deny(429, "too many unverified requests from this address; retry later")
            return
        try:
            body = await asyncio.wait_for(self._read_body(headers, receive),
                                          self.door.timeout(lane))
        except TooLargeError:
            await deny(413, f"request body over {self.max_body} bytes")
            return
        except TimeoutError:
            await deny(408, f"request body not sent within {self.door.timeout(lane):g} s "
                       f"({lane} lane)")
            return
        except ConnectionError:
            record.update(decision="deny", reason="client went away before sending its body")
            finish()
            return
        finally:
            self.door.release(remote, lane)
        if not public:
            try:
                signed_path = f"{path}?{query}" if query else path
                target = headers.get("host", "")
                v = verify(self.secret, method, target, signed_path, headers, body,
                           self.nonces, not_before=self.not_before)
                if not self.targets(target, scope.get("server"), scope.get("scheme", "http")):
                    raise AuthError(f"request was signed for {target[:100]!r}, which is not "
                                    "this agent (a request for another node?); if the bot "
                                    "reaches this agent by another name, start it with --name")
                record["user"] = v.user
                record.pop("claimed_user", None)
            except AuthError as exc:
                await deny(401, str(exc))
                return
            conn = self.door.lookup(scope.get("client"))
            if conn is not None:
                conn.verified = True
        record["decision"] = "allow"
        state = scope.setdefault("state", {})
        state["ncclbot_user"] = record["user"]
        sent = {"done": False}

        async def replay() -> Message:
            if not sent["done"]:
                sent["done"] = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            await self.app(scope, replay, send_wrapper)
        finally:
            finish()

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes:
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ConnectionError("client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise TooLargeError
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _deny(self, scope: Scope, receive: Receive, send: Send, code: int, reason: str,
                    record: dict[str, object]) -> None:
        record.update(decision="deny", reason=reason)
        # the body may not have been read: the connection cannot carry another request
        await JSONResponse({"detail": reason}, status_code=code,
                           headers={"connection": "close"})(scope, receive, send)

    def _audit(self, record: dict[str, object], status: dict[str, int], start: float) -> None:
        bounded = {k: (v[:AUDIT_FIELD_MAX] + "…" if isinstance(v, str)
                       and len(v) > AUDIT_FIELD_MAX else v) for k, v in record.items()}
        line = {**bounded, "status": status["code"],
                "duration_ms": round((time.monotonic() - start) * 1000, 1)}
        if record.get("decision") == "allow" and status["code"] not in REFUSALS:
            self.audit.write(**line)
            return
        # refusals, before or after the signature check: who and what at a bounded rate
        user = record.get("user")
        claimed = record.get("claimed_user")
        key = f"user {user}" if user else str(record.get("remote"))
        self.door.refusals.record(key, str(status["code"] or "disconnected"),
                                  str(record.get("reason") or record.get("outcome") or ""),
                                  detail=line, user=str(user or claimed or "") or None)
