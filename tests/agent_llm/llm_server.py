"""A scripted OpenAI-compatible chat completions server on 127.0.0.1, recording every request.

Each scripted step is a reply for one POST /v1/chat/completions:
  {"tool_calls": [(name, args), ...]}   the model calls tools
  {"content": "..."}                    the model's text (final answer)
  {"sleep": seconds, ...}               answer only after sleeping (for client timeouts)
  callable(request_json) -> step        decided from what the model was sent
An exhausted script answers HTTP 500.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedLLM:
    def __init__(self, script: list[Step] | None = None) -> None:
        self.script: list[Step] = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._ids = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, payload = server.handle(self.path, body)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.raw.append(body)
            request = json.loads(body)
            self.requests.append(request)
            step = self.script.pop(0) if self.script else None
        if not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}
        if step is None:
            return 500, {"error": {"message": "script exhausted"}}
        if callable(step):
            try:
                step = step(request)
            except Exception as exc:  # a broken script is a server error, seen by the test
                return 500, {"error": {"message": f"script failed: {exc!r}"}}
        if step.get("sleep"):
            self.stop.wait(step["sleep"])
        return 200, self.completion(step)

    def completion(self, step: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
        calls = []
        for name, args in step.get("tool_calls", []):
            self._ids += 1
            calls.append({"id": f"call_{self._ids}", "type": "function",
                          "function": {"name": name, "arguments": json.dumps(args)}})
        if calls:
            message["tool_calls"] = calls
        return {"id": f"chatcmpl-{self._ids}", "object": "chat.completion", "created": 0,
                "model": "scripted", "choices": [{"index": 0, "message": message,
                "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}}

    # -- helpers for assertions -----------------------------------------------------------
    def all_text(self) -> str:
        return "\n".join(b.decode("utf-8", "replace") for b in self.raw)


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results in one request, decoded from JSON where possible."""
    out = []
    for m in request["messages"]:
        if m.get("role") == "tool":
            try:
                out.append(json.loads(m["content"]))
            except ValueError:
                out.append({"raw": m["content"]})
    return out
