"""Running the app: Socket Mode (default) or the Events API over HTTP at /slack/events,
served by uvicorn (a small ASGI application in front of bolt enforces the limits).

Both warm up first (open, or build, the retrieval index and compile the log scanner) so
no listener pays for it, and both report their real state on GET /healthz: 200 once
warmed up with the state database answering (and, in Socket Mode, the websocket to Slack
connected), 503 otherwise, with the state as JSON. GET /livez is 200 while the process
serves HTTP at all (for liveness probes, which must not fail during a long warm-up).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from slack_bolt import App, BoltRequest
from typing_extensions import NotRequired, Required, TypedDict

from bot.errors import ConfigError
from tools.agent.door import Door, DoorLimits, RefusalLog, guarded_protocol

log = logging.getLogger(__name__)
EVENTS_PATH = "/slack/events"
MAX_BODY = 4 * 2**20


class Scope(TypedDict, total=False):
    """The parts of an ASGI connection scope read here (https://asgi.readthedocs.io)."""

    type: Required[str]
    path: str
    method: str
    headers: list[tuple[bytes, bytes]]
    client: tuple[str, int] | None
    query_string: bytes


class Message(TypedDict, total=False):
    """An ASGI event either way: `http.request` and `http.disconnect` in,
    `http.response.start` and `http.response.body` out, and the lifespan events."""

    type: Required[str]
    body: bytes
    more_body: bool
    status: int
    headers: list[tuple[bytes, bytes]]


Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class HealthState(TypedDict):
    """What GET /healthz reports."""

    ready: bool
    store: bool
    socket_connected: NotRequired[bool]
    warm_error: NotRequired[str]


class Health:
    """The app's state for /healthz: warmed up, state database answering, socket connected."""

    def __init__(self, store_ping: Callable[[], bool] = lambda: True,
                 connected: Callable[[], bool] | None = None, ready: bool = False) -> None:
        self.store_ping = store_ping
        self.connected = connected
        self.ready = threading.Event()
        self.warm_error: str | None = None
        if ready:
            self.ready.set()

    def status(self) -> tuple[bool, HealthState]:
        state: HealthState = {"ready": self.ready.is_set(), "store": bool(self.store_ping())}
        if self.connected is not None:
            state["socket_connected"] = bool(self.connected())
        ok = all(state.values())
        if self.warm_error:
            state["warm_error"] = self.warm_error
        return ok, state


#: The door's limits for Slack's endpoint: idle sockets closed after 5 s, a request head
#: within 10 s, 64 connections per address not serving a request whose body is in, a few
#: slow bodies per address (10 s each) and then only bodies up to 256 KiB sent at once
#: (Slack's events are small and sent at once). See tools/agent/door.py.
LIMITS = DoorLimits(fast_max_body=256 * 1024)
#: How long a client may take to send a request's body, in seconds.
BODY_TIMEOUT_S = LIMITS.body_timeout_s
_DIGITS = re.compile(r"^\d{1,12}$")


async def _reply(send: Send, status: int, body: bytes,
                 headers: dict[str, str | Sequence[str]] | None = None) -> None:
    raw: list[tuple[bytes, bytes]] = [(b"content-length", str(len(body)).encode())]
    for k, v in (headers or {}).items():
        if k.lower() == "content-length":
            continue
        for item in [v] if isinstance(v, str) else v:
            raw.append((k.lower().encode(), str(item).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None when it grows past `limit` (the rest is not read);
    ConnectionError when the client goes away first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionError("client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def refusal_log() -> RefusalLog:
    """Refusals at the Slack door, as rate-bounded JSON lines in the log (warning)."""
    def write(**fields: object) -> None:
        log.warning("slack door: %s", json.dumps(fields, default=str))

    return RefusalLog(write, detail_lines=5)


def slack_asgi(app: App | None, path: str = EVENTS_PATH, health: Health | None = None,
               max_body: int = MAX_BODY, door: Door | None = None) -> ASGIApp:
    """The ASGI application uvicorn serves: POST `path` goes to bolt (signature checked,
    503 until warmed up), GET /healthz and /livez. Malformed requests get a clean 4xx
    before anything else: a Content-Length that is not a number (or is too large) is
    refused before the body is read, a body that grows past `max_body` or takes longer
    than its lane allows (`door.admit`) stops being read, a timestamp that is not a number
    and a JSON body that does not parse are refused. Every refusal (and bolt's 401 for a
    bad signature) is counted in `door.refusals`.
    `app=None` serves only the health routes (Socket Mode)."""
    state: Health = health or Health(ready=True)
    gate = door or Door(LIMITS, refusal_log())

    async def refuse(send: Send, remote: str, route: str, status: int, body: bytes,
                     headers: dict[str, str | Sequence[str]] | None = None) -> None:
        gate.refusals.record(remote, str(status), body.decode("utf-8", "replace"),
                             detail={"event": "refused", "remote": remote, "path": route[:200],
                                     "status": status,
                                     "reason": body.decode("utf-8", "replace")})
        await _reply(send, status, body, {"connection": "close", **(headers or {})})

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        route, method = scope["path"], scope["method"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        if method == "GET" and route == "/healthz":
            # off the event loop: a database that does not answer must not stall events
            ok, report = await asyncio.to_thread(state.status)
            await _reply(send, 200 if ok else 503, json.dumps(report).encode(),
                         {"content-type": "application/json"})
            return
        if method == "GET" and route == "/livez":
            await _reply(send, 200, b"ok", {"content-type": "text/plain"})
            return
        if method != "POST" or app is None or route != path:
            await _reply(send, 404, b"not found")
            return
        remote = str((scope.get("client") or ("?", 0))[0])
        length = headers.get("content-length")
        if length is not None and not _DIGITS.match(length.strip()):
            await refuse(send, remote, route, 400, b"bad Content-Length")
            return
        if length is not None and int(length) > max_body:
            await refuse(send, remote, route, 413, b"too large")
            return
        stamp = headers.get("x-slack-request-timestamp")
        if stamp is not None and not _DIGITS.match(stamp.strip()):
            await refuse(send, remote, route, 400, b"bad X-Slack-Request-Timestamp")
            return
        size = int(length) if length is not None else (
            None if "transfer-encoding" in headers else 0)
        lane = gate.admit(remote, size)
        if lane is None:
            await refuse(send, remote, route, 429, b"too many slow requests from this address",
                         {"retry-after": "1"})
            return
        try:
            body = await asyncio.wait_for(_read_body(receive, max_body), gate.timeout(lane))
        except TimeoutError:
            await refuse(send, remote, route, 408, b"request body too slow")
            return
        except ConnectionError:
            gate.refusals.record(remote, "disconnected", "client went away before its body")
            return
        finally:
            gate.release(remote, lane)
        if body is None:
            await refuse(send, remote, route, 413, b"too large")
            return
        conn = gate.lookup(scope.get("client"))
        if conn is not None:  # its body is in: bolt answers it at once, keep it
            conn.verified = True
        if headers.get("content-type", "").startswith("application/json"):
            try:
                json.loads(body)
            except ValueError:
                await refuse(send, remote, route, 400, b"the body is not JSON")
                return
        if not state.ready.is_set():  # Slack retries the event once we are up
            await _reply(send, 503, b"warming up", {"retry-after": "30"})
            return
        request = BoltRequest(body=body.decode("utf-8", "replace"),
                              query=scope.get("query_string", b"").decode("latin-1"),
                              headers={k: [v] for k, v in headers.items()})
        try:
            resp = await asyncio.to_thread(app.dispatch, request)
        except Exception:
            log.exception("a request could not be handled")
            await _reply(send, 400, b"bad request")
            return
        if resp.status == 401:  # bolt's answer to a missing, stale or wrong signature
            gate.refusals.record(remote, "401", "Slack signature check failed",
                                 detail={"event": "refused", "remote": remote,
                                         "path": route[:200], "status": 401,
                                         "reason": "Slack signature check failed"})
        await _reply(send, resp.status, resp.body.encode("utf-8"), dict(resp.headers))

    return asgi


class HttpServer:
    """uvicorn serving `slack_asgi` in a thread behind a `Door`: idle sockets closed, a
    per-address cap on them, a lane for requests sent at once (no uvicorn-wide
    limit_concurrency: idle sockets would lock everyone out with a 503)."""

    def __init__(self, app: App | None, host: str, port: int, health: Health | None = None,
                 path: str = EVENTS_PATH, limits: DoorLimits = LIMITS) -> None:
        import uvicorn

        self.door = Door(limits, refusal_log())
        config = uvicorn.Config(slack_asgi(app, path, health, door=self.door), host=host,
                                port=port, log_level="warning", lifespan="off",
                                access_log=False, http=guarded_protocol(self.door),
                                timeout_keep_alive=int(limits.idle_timeout_s),
                                h11_max_incomplete_event_size=limits.max_head_bytes)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="ncclbot-http",
                                       daemon=True)

    def start(self) -> HttpServer:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise OSError("the HTTP server did not start (is the port in use?)")
            time.sleep(0.02)
        return self

    @property
    def port(self) -> int:
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def http_server(app: App | None, host: str = "0.0.0.0", port: int = 3000,
                path: str = EVENTS_PATH, health: Health | None = None) -> HttpServer:
    """The Slack HTTP endpoint (and health routes), started."""
    return HttpServer(app, host, port, health, path).start()


def warm_up(health: Health, warm: Callable[[], None]) -> None:
    """Run `warm` and mark the app ready; a failed warm-up is logged and shown in /healthz
    (the app still answers: whatever failed fails again in a listener, with a message)."""
    log.info("warming up: opening the retrieval index (built on first start, which takes "
             "a while)…")
    t0 = time.monotonic()
    try:
        warm()
        log.info("ready in %.1f s", time.monotonic() - t0)
    except Exception as exc:
        health.warm_error = f"{type(exc).__name__}: {exc}"
        log.exception("warm-up failed; answers will retry what failed")
    health.ready.set()


def serve_http(app: App, host: str, port: int, health: Health,
               warm: Callable[[], None]) -> None:
    """Listen at once (health probes answer during the warm-up), take events once warm."""
    server = http_server(app, host, port, health=health)
    log.info("ncclbot Slack app on http://%s:%d%s", host, server.port, EVENTS_PATH)
    try:
        warm_up(health, warm)
        server.thread.join()
    finally:
        server.stop()


class _SocketClient(Protocol):
    def is_connected(self) -> bool: ...


class SocketHandler(Protocol):
    """What is used of bolt's `SocketModeHandler` (its own methods are untyped)."""

    @property
    def client(self) -> _SocketClient: ...

    def connect(self) -> None: ...

    def close(self) -> None: ...


def socket_handler(app: App, app_token: str | None) -> SocketHandler:
    if not app_token:
        raise ConfigError("SLACK_APP_TOKEN is not set (Socket Mode needs an xapp- token)",
                          hint="Create an app-level token with connections:write, or run "
                          "`ncclbot serve slack --http --port 3000`; see docs/slack.md.")
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    return SocketModeHandler(app, app_token)


def serve_socket(app: App, app_token: str | None, health: Health, warm: Callable[[], None],
                 health_host: str = "127.0.0.1", health_port: int = 3000) -> None:
    """Warm up, then connect the websocket; /healthz on `health_port` (0: none) reports
    whether it is connected."""
    handler = socket_handler(app, app_token)
    health.connected = handler.client.is_connected
    server = http_server(None, health_host, health_port, health=health) if health_port else None
    if server is not None:
        log.info("health check on http://%s:%d/healthz", health_host, server.port)
    try:
        warm_up(health, warm)
        handler.connect()
        log.info("connected to Slack (Socket Mode)")
        threading.Event().wait()
    finally:
        handler.close()
        if server is not None:
            server.stop()
