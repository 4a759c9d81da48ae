"""Fixtures: a local Slack, settings pointing at it, the app over real HTTP, a crash log."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import Settings, load_settings
from tests.slack.fake_slack import BOT_TOKEN, FakeSlack

ROOT = Path(__file__).resolve().parents[2]
SECRET = "test-signing-secret"
ONCALL = "UONCALL"
CASE = ROOT / "tests" / "fixtures" / "cases" / "cuda-oom-on-one-rank-others-timeout.yaml"


def crash_log(host: str = "gpu-node07") -> bytes:
    """A real case's log, as a pdsh-prefixed multi-host log naming `host`."""
    text = yaml.safe_load(CASE.read_text())["log"]
    return "".join(f"{host}: {line}\n" for line in text.splitlines()).encode()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture(scope="session")
def shared_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data dir for the session, so the retrieval index is built once."""
    return tmp_path_factory.mktemp("slack-data")


@pytest.fixture
def settings(slack: FakeSlack, tmp_path: Path, shared_data: Path) -> Settings:
    return load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SECRET,
                         slack_api_url=slack.api_url, data_dir=shared_data,
                         sqlite_path=tmp_path / "state.sqlite3",
                         oncall_users=[ONCALL], oncall_usergroup="SONCALL")


def sign(body: str, ts: int | None = None, secret: str = SECRET) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    base = f"v0:{ts}:{body}".encode()
    sig = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"x-slack-request-timestamp": str(ts), "x-slack-signature": sig}


class Poster:
    """Posts signed requests to the app's /slack/events over real HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url

    def post(self, body: str, ctype: str, headers: dict[str, str] | None = None
             ) -> tuple[int, str]:
        hdrs = {"Content-Type": ctype, **(headers if headers is not None else sign(body))}
        req = urllib.request.Request(self.url, data=body.encode(), headers=hdrs, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def event(self, event: dict[str, Any], **kw: Any) -> tuple[int, str]:
        body = json.dumps({"type": "event_callback", "team_id": "T1", "api_app_id": "A1",
                           "event_id": f"Ev{time.monotonic_ns()}", "event": event})
        return self.post(body, "application/json", **kw)

    def command(self, text: str, user: str = "UALICE", channel: str = "C1") -> tuple[int, str]:
        body = urllib.parse.urlencode({
            "command": "/nccl", "text": text, "user_id": user, "channel_id": channel,
            "team_id": "T1", "response_url": "http://127.0.0.1:9/none", "trigger_id": "t1"})
        return self.post(body, "application/x-www-form-urlencoded")

    def action(self, payload: dict[str, Any]) -> tuple[int, str]:
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        return self.post(body, "application/x-www-form-urlencoded")


@pytest.fixture
def http_app(settings: Settings) -> Iterator[Poster]:
    from bot.slack.app import create_app
    from bot.slack.serve import http_server

    app = create_app(settings, http=True)
    server = http_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Poster(f"http://127.0.0.1:{server.server_address[1]}/slack/events")
    server.shutdown()
    server.server_close()


def block_text(blocks: list[dict[str, Any]] | None) -> str:
    """All the text of a message's blocks, for assertions."""
    return json.dumps(blocks or [], ensure_ascii=False)


def click(action_id: str, value: str, user: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "block_actions", "user": {"id": user}, "team": {"id": "T1"},
            "api_app_id": "A1", "trigger_id": "trig", "channel": {"id": message["channel"]},
            "container": {"type": "message", "channel_id": message["channel"]},
            "message": {"ts": message["ts"], "thread_ts": message.get("thread_ts")},
            "response_url": "http://127.0.0.1:9/none",
            "actions": [{"action_id": action_id, "value": value, "type": "button",
                         "block_id": "b", "action_ts": "1"}]}
