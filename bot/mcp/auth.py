"""Who may call the MCP server over HTTP: a bearer token (NCCLBOT_MCP_TOKEN).

Loopback binds may run without one; any other bind needs one, and when a token is set
every HTTP request must carry `Authorization: Bearer <token>` (compared in constant
time), or it is answered 401 before it reaches MCP.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any

from bot.errors import ConfigError

#: the environment variable that holds the token
TOKEN_ENV = "NCCLBOT_MCP_TOKEN"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether binding `host` only accepts connections from this machine."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to, assume it is reachable


def check_http_token(host: str, token: str | None) -> str | None:
    """The token HTTP calls must carry (None: none needed on a loopback bind); ConfigError
    when the bind needs one and has none, or the token is too short to be one."""
    token = (token or "").strip() or None
    if token is None:
        if is_loopback(host):
            return None
        raise ConfigError(f"--host {host} is reachable from other machines, so the MCP server "
                          f"needs a bearer token: set {TOKEN_ENV}",
                          hint="e.g. export NCCLBOT_MCP_TOKEN=$(openssl rand -hex 32), and "
                          "give clients the header `Authorization: Bearer <token>`.")
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{TOKEN_ENV} is too short ({len(token)} characters; at least "
                          f"{MIN_TOKEN_CHARS})", hint="Use a random one: openssl rand -hex 32")
    return token


def bearer_ok(header: str | None, token: str) -> bool:
    """Whether an Authorization header value carries `token` as a bearer token."""
    scheme, _, value = (header or "").strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(),
                                                              token.encode())


class BearerAuth:
    """ASGI middleware: HTTP requests without the bearer token get 401 (lifespan and other
    scopes pass, so the wrapped app still starts and stops)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            header = next((v.decode("latin-1") for k, v in scope.get("headers", [])
                           if k.lower() == b"authorization"), None)
            if not bearer_ok(header, self.token):
                body = json.dumps({"error": "unauthorized", "detail": "this MCP server needs "
                                   "Authorization: Bearer <NCCLBOT_MCP_TOKEN>"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="ncclbot"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
