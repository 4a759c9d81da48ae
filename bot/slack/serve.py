"""Running the app: Socket Mode (default) or the Events API over HTTP at /slack/events."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from slack_bolt import App, BoltRequest

from bot.errors import ConfigError

log = logging.getLogger(__name__)
EVENTS_PATH = "/slack/events"
MAX_BODY = 4 * 2**20


def http_server(app: App, host: str = "0.0.0.0", port: int = 3000,
                path: str = EVENTS_PATH) -> ThreadingHTTPServer:
    """A threaded HTTP server: POST `path` goes to bolt (signature checked), GET /healthz."""

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
            if urlsplit(self.path).path == "/healthz":
                self._reply(200, b"ok", {"Content-Type": "text/plain"})
            else:
                self._reply(404, b"not found")

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            if parts.path != path:
                self._reply(404, b"not found")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._reply(413, b"too large")
                return
            body = self.rfile.read(length).decode("utf-8", "replace")
            headers = {k.lower(): [v] for k, v in self.headers.items()}
            resp = app.dispatch(BoltRequest(body=body, query=parts.query, headers=headers))
            self._reply(resp.status, resp.body.encode("utf-8"), dict(resp.headers))

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve_http(app: App, host: str, port: int) -> None:
    server = http_server(app, host, port)
    log.info("ncclbot Slack app on http://%s:%d%s", host, port, EVENTS_PATH)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def serve_socket(app: App, app_token: str | None) -> None:
    if not app_token:
        raise ConfigError("SLACK_APP_TOKEN is not set (Socket Mode needs an xapp- token)",
                          hint="Create an app-level token with connections:write, or run "
                          "`ncclbot serve slack --http --port 3000`; see docs/slack.md.")
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    SocketModeHandler(app, app_token).start()
