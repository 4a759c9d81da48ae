"""Running the app: Socket Mode (default) or the Events API over HTTP at /slack/events.

Both warm up first (open, or build, the retrieval index and compile the log scanner) so
no listener pays for it, and both report their real state on GET /healthz: 200 once
warmed up with the state database answering (and, in Socket Mode, the websocket to Slack
connected), 503 otherwise, with the state as JSON. GET /livez is 200 while the process
serves HTTP at all (for liveness probes, which must not fail during a long warm-up).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from slack_bolt import App, BoltRequest

from bot.errors import ConfigError

log = logging.getLogger(__name__)
EVENTS_PATH = "/slack/events"
MAX_BODY = 4 * 2**20


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

    def status(self) -> tuple[bool, dict[str, Any]]:
        state: dict[str, Any] = {"ready": self.ready.is_set(), "store": bool(self.store_ping())}
        if self.connected is not None:
            state["socket_connected"] = bool(self.connected())
        ok = all(state.values())
        if self.warm_error:
            state["warm_error"] = self.warm_error
        return ok, state


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # bursts of events must not be reset by a short listen backlog


def http_server(app: App | None, host: str = "0.0.0.0", port: int = 3000,
                path: str = EVENTS_PATH, health: Health | None = None) -> ThreadingHTTPServer:
    """A threaded HTTP server: POST `path` goes to bolt (signature checked; 503 until warmed
    up), GET /healthz and /livez. `app=None` serves only the health routes (Socket Mode)."""
    state: Health = health or Health(ready=True)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            log.debug(fmt, *args)

        def _reply(self, status: int, body: bytes, headers: dict[str, Any] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                for item in v if isinstance(v, list) else [v]:
                    self.send_header(k, item)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            route = urlsplit(self.path).path
            if route == "/healthz":
                ok, report = state.status()
                self._reply(200 if ok else 503, json.dumps(report).encode(),
                            {"Content-Type": "application/json"})
            elif route == "/livez":
                self._reply(200, b"ok", {"Content-Type": "text/plain"})
            else:
                self._reply(404, b"not found")

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            if app is None or parts.path != path:
                self.rfile.read(min(length, MAX_BODY))
                self._reply(404, b"not found")
                return
            if length > MAX_BODY:
                self._reply(413, b"too large")
                return
            body = self.rfile.read(length).decode("utf-8", "replace")
            if not state.ready.is_set():  # Slack retries the event once we are up
                self._reply(503, b"warming up", {"Retry-After": "30"})
                return
            headers: dict[str, str | Sequence[str]] = {
                k.lower(): [v] for k, v in self.headers.items()}
            resp = app.dispatch(BoltRequest(body=body, query=parts.query, headers=headers))
            self._reply(resp.status, resp.body.encode("utf-8"), dict(resp.headers))

    return Server((host, port), Handler)


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
    thread = threading.Thread(target=server.serve_forever, name="ncclbot-http", daemon=True)
    thread.start()
    log.info("ncclbot Slack app on http://%s:%d%s", host, port, EVENTS_PATH)
    try:
        warm_up(health, warm)
        thread.join()
    finally:
        server.shutdown()
        server.server_close()


def socket_handler(app: App, app_token: str | None) -> Any:
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
        threading.Thread(target=server.serve_forever, name="ncclbot-health",
                         daemon=True).start()
        log.info("health check on http://%s:%d/healthz", health_host, health_port)
    try:
        warm_up(health, warm)
        handler.connect()
        log.info("connected to Slack (Socket Mode)")
        threading.Event().wait()
    finally:
        handler.close()
        if server is not None:
            server.shutdown()
            server.server_close()
