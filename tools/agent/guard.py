"""ASGI middleware in front of every endpoint: body size limit, signature check, audit line.

It reads the (bounded) body itself, verifies the HMAC before any parsing, replays the
body to the app, and writes exactly one audit line per request, allowed or not.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

from tools.agent.audit import AuditLog
from tools.agent.auth import AuthError, NonceCache, verify

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Reachable without a signature (GET only).
PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})


class TooLargeError(Exception):
    pass


class Guard:
    def __init__(self, app: ASGIApp, *, secret: bytes, audit: AuditLog, nonces: NonceCache,
                 max_body: int) -> None:
        self.app, self.secret, self.audit = app, secret, audit
        self.nonces, self.max_body = nonces, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.monotonic()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        method, path = scope["method"], scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        record: dict[str, Any] = {
            "method": method, "path": path, "user": headers.get("x-ncclbot-user"),
            "remote": (scope.get("client") or ("?", 0))[0]}
        status = {"code": 0}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            body = await self._read_body(headers, receive)
        except TooLargeError:
            await self._deny(scope, receive, send_wrapper, 413,
                             f"request body over {self.max_body} bytes", record)
            self._audit(record, status, start)
            return
        if not (method == "GET" and path in PUBLIC_PATHS):
            try:
                signed_path = f"{path}?{query}" if query else path
                v = verify(self.secret, method, signed_path, headers, body, self.nonces)
                record["user"] = v.user
            except AuthError as exc:
                await self._deny(scope, receive, send_wrapper, 401, str(exc), record)
                self._audit(record, status, start)
                return
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
            record.update(state.get("ncclbot_audit", {}))
            self._audit(record, status, start)

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes:
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            raise TooLargeError
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise TooLargeError
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _deny(self, scope: Scope, receive: Receive, send: Send, code: int, reason: str,
                    record: dict[str, Any]) -> None:
        record.update(decision="deny", reason=reason)
        await JSONResponse({"detail": reason}, status_code=code)(scope, receive, send)

    def _audit(self, record: dict[str, Any], status: dict[str, int], start: float) -> None:
        self.audit.write(**record, status=status["code"],
                         duration_ms=round((time.monotonic() - start) * 1000, 1))
