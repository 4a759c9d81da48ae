"""Fixtures: a local Slack, settings pointing at it, the app over real HTTP, a crash log."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import Settings, load_settings
from tests.slack.fake_slack import BOT_TOKEN, FakeSlack

ROOT = Path(__file__).resolve().parents[2]
SECRET = "test-signing-secret"
ONCALL = "UONCALL"
CASE = ROOT / "tests" / "fixtures" / "logs" / "oom-one-rank.yaml"


def crash_log(host: str = "gpu-node07") -> bytes:
    """A real case's log, as a pdsh-prefixed multi-host log naming `host`."""
    text = yaml.safe_load(CASE.read_text())["log"]
    return "".join(f"{host}: {line}\n" for line in text.splitlines()).encode()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def app(settings: Settings) -> Iterator[Any]:
    """The real Slack app against the fake Slack server (Socket Mode dispatch); shut down
    after the test."""
    from bot.slack.app import create_app, shutdown

    app = create_app(settings)
    yield app
    shutdown(app)


@pytest.fixture(scope="session")
def shared_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data dir for the session (downloaded logs)."""
    return tmp_path_factory.mktemp("slack-data")


#: How long the one-off index build may take (embedding every card on a loaded machine).
WARM_LIMIT_S = 1800


@contextmanager
def own_time_limit(limit_s: float) -> Iterator[None]:
    """pytest-timeout (signal method) times a test's fixtures with the test, so a session
    fixture's one-off work would count against whichever test happens to run first. Give
    that work its own limit, then hand the test back the time it had left."""
    left = signal.getitimer(signal.ITIMER_REAL)[0] if hasattr(signal, "setitimer") else 0.0
    if left:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        yield
    finally:
        if left:
            signal.setitimer(signal.ITIMER_REAL, left)


@pytest.fixture(scope="session", autouse=True)
def warm_retriever(shared_index_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Open (or build) the session's retrieval index once, before any Slack test, as
    `ncclbot serve slack` does before it takes events: listeners then never build it
    (minutes on a loaded machine) while a test waits for an answer."""
    from bot.answering.troubleshooter import Troubleshooter

    with pytest.MonkeyPatch.context() as mp, own_time_limit(WARM_LIMIT_S):
        for name in list(os.environ):  # the environment the tests will see
            if name.startswith(("NCCLBOT_", "SLACK_")):
                mp.delenv(name)
        Troubleshooter(load_settings(data_dir=tmp_path_factory.mktemp("warm"),
                                     index_dir=shared_index_dir)).warm()


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


_EVENT_IDS = itertools.count(1)


class Poster:
    """Posts signed requests to the app's /slack/events over real HTTP."""

    def __init__(self, url: str, app: Any = None, settings: Settings | None = None,
                 deps: Any = None) -> None:
        self.url = url
        self.app = app
        self.settings = settings
        self.deps = deps

    def post(self, body: str, ctype: str, headers: dict[str, str] | None = None
             ) -> tuple[int, str]:
        hdrs = {"Content-Type": ctype, **(headers if headers is not None else sign(body))}
        req = urllib.request.Request(self.url, data=body.encode(), headers=hdrs, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def event(self, event: dict[str, Any], event_id: str | None = None,
              retry: int | None = None) -> tuple[int, str]:
        """An Events API callback; `retry` sends it as Slack's n-th retry of `event_id`."""
        body = json.dumps({"type": "event_callback", "team_id": "T1", "api_app_id": "A1",
                           "event_id": event_id or f"Ev{next(_EVENT_IDS):08d}",
                           "event": event})
        headers = sign(body)
        if retry is not None:
            headers.update({"x-slack-retry-num": str(retry),
                            "x-slack-retry-reason": "http_timeout"})
        return self.post(body, "application/json", headers)

    def command(self, text: str, user: str = "UALICE", channel: str = "C1") -> tuple[int, str]:
        body = urllib.parse.urlencode({
            "command": "/nccl", "text": text, "user_id": user, "channel_id": channel,
            "team_id": "T1", "response_url": "http://127.0.0.1:9/none",
            "trigger_id": f"t{next(_EVENT_IDS)}"})
        return self.post(body, "application/x-www-form-urlencoded")

    def action(self, payload: dict[str, Any]) -> tuple[int, str]:
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        return self.post(body, "application/x-www-form-urlencoded")


@contextmanager
def serving(app: Any, settings: Settings, health: Any = None) -> Iterator[Poster]:
    """The app behind the real HTTP server on 127.0.0.1; on exit the server stops and the
    listener pool is shut down (running listeners finish, queued ones are dropped)."""
    from bot.slack.app import shutdown
    from bot.slack.serve import http_server

    server = http_server(app, "127.0.0.1", 0, health=health)
    try:
        yield Poster(f"http://127.0.0.1:{server.port}/slack/events", app, settings)
    finally:
        server.stop()
        shutdown(app)


@pytest.fixture
def make_app(settings: Settings) -> Iterator[Callable[..., tuple[Any, Any]]]:
    """Build apps whose parts (deps) a test can swap; every one is shut down afterwards."""
    from bot.slack.app import build_deps, create_app, shutdown, web_client

    apps: list[Any] = []

    def make(custom: Settings | None = None, http: bool = False,
             tweak: Callable[[Any], None] | None = None) -> tuple[Any, Any]:
        s = custom or settings
        client = web_client(s)
        deps = build_deps(s, client)
        if tweak is not None:
            tweak(deps)
        app = create_app(s, client=client, deps=deps, http=http)
        apps.append(app)
        return app, deps

    yield make
    for app in apps:
        shutdown(app)


class Scripted:
    """Stands in for the Troubleshooter's answer: the next scripted answer (after analysing
    the question's logs through the real cache); records every question."""

    def __init__(self, troubleshooter: Any, *answers: dict[str, Any]) -> None:
        from bot.answering.contract import Answer

        self.inner = troubleshooter
        self.answers = [Answer.model_validate(a) for a in answers]
        self.requests: list[Any] = []

    def __call__(self, question: Any, **kw: Any) -> Any:
        self.requests.append(question)
        self.inner.analysis(question)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def script_answers(deps: Any, *answers: dict[str, Any]) -> Scripted:
    """Make the app's Troubleshooter answer `answers` in turn (the last one repeats)."""
    scripted = Scripted(deps.troubleshooter, *answers)
    deps.troubleshooter.answer = scripted
    return scripted


class CountingAnalyzer:
    """Wraps the real analyzer and counts how often logs are analyzed."""

    def __init__(self, analyze: Callable[..., Any]) -> None:
        self.analyze, self.calls = analyze, 0

    def __call__(self, paths: Any) -> Any:
        self.calls += 1
        return self.analyze(paths)


@pytest.fixture
def http_app(settings: Settings) -> Iterator[Poster]:
    from bot.slack.app import create_app

    with serving(create_app(settings, http=True), settings) as poster:
        yield poster


def hang_answer(notes: tuple[str, ...] = (), ras_note: str | None = None) -> dict[str, Any]:
    """What a node's agent answers for `hang` (a ToolResult, as JSON over HTTP): four ranks,
    rank 1 in its own code, the others in all_reduce, and the node's `notes` / `ras_note`."""
    from tools.hang.model import Frame, HangSample, RankSample, ThreadStack
    from tools.result import ToolResult

    def rank(r: int) -> RankSample:
        top = (Frame(function="load_shard", file="/job/train.py", line=40) if r == 1 else
               Frame(function="all_reduce",
                     file="/usr/lib/python3/torch/distributed/distributed_c10d.py", line=2501))
        return RankSample(pid=1000 + r, rank=r, local_rank=r, world_size=4, job="j1",
                          threads=[ThreadStack(name="MainThread", frames=[top])])

    sample = HangSample(host="gpu-node07", ranks=[rank(r) for r in range(4)], notes=list(notes),
                        ras_note=ras_note)
    return ToolResult(tool="hang", status="success", data=sample.model_dump(mode="json"),
                      invocation="hang").model_dump(mode="json")


def block_text(blocks: list[dict[str, Any]] | None) -> str:
    """All the text of a message's blocks, for assertions."""
    return json.dumps(blocks or [], ensure_ascii=False)


def click(action_id: str, value: str, user: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "block_actions", "user": {"id": user}, "team": {"id": "T1"},
            "api_app_id": "A1", "trigger_id": f"trig{next(_EVENT_IDS)}",
            "channel": {"id": message["channel"]},
            "container": {"type": "message", "channel_id": message["channel"]},
            "message": {"ts": message["ts"], "thread_ts": message.get("thread_ts"),
                        "blocks": message.get("blocks") or [], "text": message.get("text")},
            "response_url": "http://127.0.0.1:9/none",
            "actions": [{"action_id": action_id, "value": value, "type": "button",
                         "block_id": "b", "action_ts": "1"}]}


# -- a real node agent on loopback, and apps whose inventory points at it ----------------
AGENT_SECRET = "s" * 40


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The real node agent (`ncclbot serve agent`'s app) under uvicorn on 127.0.0.1."""
    import uvicorn

    from tools.agent.app import create_app

    audit = tmp_path / "agent-audit.jsonl"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        create_app(secret=AGENT_SECRET.encode(), audit_log=audit,
                   force_users=("slack:UBOB",)),  # on call: may force and read stacks
        host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120  # generous: a busy machine; fail here, not later
    while not server.started and time.monotonic() < deadline:
        assert thread.is_alive(), "the node agent's server thread died"
        time.sleep(0.05)
    assert server.started, "the node agent did not start within 120 s"
    yield f"http://127.0.0.1:{port}", audit
    server.should_exit = True
    thread.join(5)


@pytest.fixture
def probe_settings(slack: FakeSlack, tmp_path: Path, agent: tuple[str, Path],
                   shared_data: Path) -> Callable[..., Settings]:
    """Settings for an app whose node inventory is the agent on loopback (overridable)."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(f"nodes:\n  gpu-node07: {{url: '{agent[0]}'}}\n")
    slack.usergroups["SONCALL"] = ["UBOB"]

    def make(**overrides: Any) -> Settings:
        return load_settings(**{
            "slack_bot_token": BOT_TOKEN, "slack_signing_secret": SECRET,
            "slack_api_url": slack.api_url, "data_dir": shared_data,
            "sqlite_path": tmp_path / "s.sqlite3", "oncall_usergroup": "SONCALL",
            "nodes_file": nodes, "agent_secret": AGENT_SECRET, **overrides})

    return make


@pytest.fixture
def probe_app(probe_settings: Callable[..., Settings], make_app: Any) -> Iterator[Poster]:
    settings = probe_settings()
    app, deps = make_app(settings, http=True)
    with serving(app, settings) as poster:
        poster.deps = deps
        yield poster
