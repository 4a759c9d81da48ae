"""A local Slack Web API on 127.0.0.1 that records every call (threaded http.server).

Speaks what ncclbot uses: auth.test, chat.postMessage/update/postEphemeral, reactions.add,
files.info, private file downloads, usergroups.users.list, views.open, chat.getPermalink and
uploads (files.getUploadURLExternal + POST + files.completeUploadExternal, and files.upload v1).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BOT_TOKEN = "xoxb-test-token"
BOT_USER = "UBOT"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the listen backlog: set before bind, not after


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    t: float = field(default_factory=time.monotonic)


class FakeSlack:
    """Start with `with FakeSlack() as slack:`; `slack.api_url` goes to NCCLBOT_SLACK_API_URL."""

    def __init__(self, token: str = BOT_TOKEN) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.uploads: dict[str, bytes] = {}
        self.usergroups: dict[str, list[str]] = {}
        self.downloads = 0
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._cv = threading.Condition()
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.url}/api/"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeSlack:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- test helpers -----------------------------------------------------------------
    def add_file(self, name: str, content: bytes, **extra: Any) -> dict[str, Any]:
        """Host a private file; returns the Slack file object an event would carry."""
        fid = f"F{next(self._ids):06d}"
        self.contents[fid] = content
        f = {"id": fid, "name": name, "title": name, "size": len(content),
             "mimetype": "text/plain", "filetype": "text",
             "url_private": f"{self.url}/files-pri/T1-{fid}/{name}",
             "url_private_download": f"{self.url}/files-pri/T1-{fid}/download/{name}", **extra}
        self.files[fid] = f
        return f

    def of(self, method: str) -> list[Call]:
        with self._cv:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, pred: Callable[[], Any], timeout: float = 90.0) -> Any:
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                got = pred()
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; calls: {[c.method for c in self.calls]}")
                self._cv.wait(min(left, 0.2))

    def wait_call(self, method: str, match: Callable[[dict[str, Any]], bool] = lambda p: True,
                  timeout: float = 90.0) -> dict[str, Any]:
        return self.wait_for(lambda: next((c.params for c in self.calls
                                           if c.method == method and match(c.params)), None),
                             timeout)

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """Current state of the bot's messages in a thread, in posting order."""
        with self._cv:
            return [m for (c, _), m in sorted(self.messages.items(), key=lambda kv: float(
                kv[0][1])) if c == channel and m.get("thread_ts") == thread_ts]

    # -- the API ----------------------------------------------------------------------
    def _api(self, method: str, p: dict[str, Any], auth: str) -> dict[str, Any]:
        if auth != f"Bearer {self.token}" and p.get("token") != self.token:
            return {"ok": False, "error": "invalid_auth"}
        if method == "auth.test":
            return {"ok": True, "url": "https://fake.slack/", "team": "T", "user": "ncclbot",
                    "team_id": "T1", "user_id": BOT_USER, "bot_id": "BBOT"}
        if method == "chat.postMessage":
            ts = f"{1700000000 + next(self._ts)}.000100"
            msg = {"channel": p["channel"], "ts": ts, "thread_ts": p.get("thread_ts"),
                   "text": p.get("text"), "blocks": p.get("blocks"), "user": BOT_USER}
            self.messages[(p["channel"], ts)] = msg
            return {"ok": True, "channel": p["channel"], "ts": ts, "message": msg}
        if method == "chat.update":
            msg = self.messages.get((p["channel"], p["ts"]))
            if msg is None:
                return {"ok": False, "error": "message_not_found"}
            msg.update(text=p.get("text"), blocks=p.get("blocks"))
            return {"ok": True, "channel": p["channel"], "ts": p["ts"]}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"{time.time():.6f}"}
        if method == "files.info":
            f = self.files.get(p.get("file", ""))
            return {"ok": True, "file": f} if f else {"ok": False, "error": "file_not_found"}
        if method == "usergroups.users.list":
            users = self.usergroups.get(p.get("usergroup", ""))
            return {"ok": True, "users": users} if users is not None else {
                "ok": False, "error": "no_such_subteam"}
        if method == "files.getUploadURLExternal":
            fid = f"F{next(self._ids):06d}"
            return {"ok": True, "file_id": fid, "upload_url": f"{self.url}/upload/{fid}"}
        if method == "files.completeUploadExternal":
            files = p.get("files") or []
            return {"ok": True, "files": [{"id": f["id"], "title": f.get("title")}
                                          for f in files]}
        if method == "chat.getPermalink":
            ts = str(p.get("message_ts", ""))
            return {"ok": True, "channel": p.get("channel"), "permalink":
                    f"https://fake.slack/archives/{p.get('channel')}/p{ts.replace('.', '')}"}
        if method in ("reactions.add", "views.open", "files.upload"):
            return {"ok": True}
        return {"ok": False, "error": "unknown_method"}

    def _record(self, method: str, params: dict[str, Any]) -> None:
        with self._cv:
            self.calls.append(Call(method, params))
            self._cv.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if not path.startswith("/files-pri/"):
                    self._send(404, b"{}")
                    return
                fid = path.split("/")[2].split("-", 1)[-1]
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    self._send(200, b"<html>login</html>", "text/html")  # as Slack does
                    return
                data = fake.contents.get(fid)
                if data is None:
                    self._send(404, b"not found", "text/plain")
                    return
                with fake._cv:
                    fake.downloads += 1
                fake._record("file.download", {"file": fid})
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                view = memoryview(data)
                for i in range(0, len(data), 1 << 20):
                    self.wfile.write(view[i:i + (1 << 20)])

            def do_POST(self) -> None:
                path = urlsplit(self.path).path
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if path.startswith("/upload/"):
                    fake.uploads[path.rsplit("/", 1)[1]] = raw
                    fake._record("upload", {"file_id": path.rsplit("/", 1)[1], "size": len(raw)})
                    self._send(200, b"OK - " + str(len(raw)).encode(), "text/plain")
                    return
                method = path.removeprefix("/api/")
                ctype = self.headers.get("Content-Type", "")
                if ctype.startswith("application/json"):
                    params = json.loads(raw or b"{}")
                elif ctype.startswith("multipart/"):
                    params = {"multipart": True}
                else:
                    params = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                for key in ("blocks", "files", "view"):
                    if isinstance(params.get(key), str):
                        params[key] = json.loads(params[key])
                with fake._cv:
                    resp = fake._api(method, params, self.headers.get("Authorization", ""))
                fake._record(method, params)
                self._send(200, json.dumps(resp).encode())

        return Handler
