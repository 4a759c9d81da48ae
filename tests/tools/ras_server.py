"""A replay NCCL RAS server on 127.0.0.1: the client protocol of `rasClientEventLoop`
(NVIDIA/nccl src/ras/client_support.cc), answering STATUS from recorded reports.

Commands are lines (a trailing '\\r' is dropped) matched case-insensitively, as NCCL does:
CLIENT PROTOCOL n -> "SERVER PROTOCOL 2"; TIMEOUT n -> "OK" or "ERROR: Invalid timeout value
…"; SET FORMAT text|json -> "OK" or "ERROR: Invalid format …" (only with `json=True`, i.e.
NCCL 2.28.7+; older servers answer "ERROR: Unknown command …"); STATUS / VERBOSE STATUS ->
the next recorded report, then the server closes the connection. Each STATUS takes the next
report of `reports` (the last one repeats), so two polls can be answered differently.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from typing import Any


class RasReplayServer:
    """`with RasReplayServer([report1, report2]) as srv: poll("127.0.0.1", srv.port, ...)`.

    `mode` breaks the protocol on purpose: "silent" (accepts, never answers), "http"
    (answers the handshake like a web server), "close" (closes right after the handshake).
    """

    def __init__(self, reports: list[str], *, json: bool = True, mode: str = "") -> None:
        self.reports, self.json, self.mode = list(reports), json, mode
        self.commands: list[list[str]] = []  # per connection, in order
        self.statuses = 0
        self._lock = threading.Lock()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                server._serve(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.tcp.daemon_threads = True
        self.port: int = self.tcp.server_address[1]
        self.thread = threading.Thread(target=self.tcp.serve_forever, daemon=True)

    def __enter__(self) -> RasReplayServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.tcp.shutdown()
        self.tcp.server_close()

    def _next_report(self) -> str:
        with self._lock:
            report = self.reports[min(self.statuses, len(self.reports) - 1)]
            self.statuses += 1
            return report

    def _serve(self, sock: socket.socket) -> None:
        seen: list[str] = []
        with self._lock:
            self.commands.append(seen)
        buf = b""
        fmt = "text"
        while True:
            try:
                chunk = sock.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                raw, _, buf = buf.partition(b"\n")
                cmd = raw.decode().removesuffix("\r")
                seen.append(cmd)
                low = cmd.lower()
                if self.mode == "silent":
                    continue
                if low.startswith("client protocol "):
                    if self.mode == "http":
                        sock.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                        return
                    sock.sendall(b"SERVER PROTOCOL 2\n")
                    if self.mode == "close":
                        return
                elif low.startswith("timeout "):
                    value = cmd[len("timeout "):]
                    ok = value.isdigit()
                    sock.sendall(b"OK\n" if ok else
                                 f"ERROR: Invalid timeout value {value}\n".encode())
                elif low.startswith("set format ") and self.json:
                    value = cmd[len("set format "):]
                    if value.lower() in ("text", "json"):
                        fmt = value.lower()
                        sock.sendall(b"OK\n")
                    else:
                        sock.sendall(f"ERROR: Invalid format {value}\n".encode())
                elif low in ("status", "verbose status"):
                    report = self._next_report()
                    if fmt == "json" and not report.lstrip().startswith("{"):
                        report = "recorded report is text but the client asked for JSON\n"
                    sock.sendall(report.encode())
                    return  # RAS_CLIENT_FINISHED: the server closes once the report is sent
                else:
                    sock.sendall(f"ERROR: Unknown command {cmd}\n".encode())
