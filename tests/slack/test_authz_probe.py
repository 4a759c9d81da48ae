"""Probes from Slack: refused for non-members, run through a real node agent on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from bot.config import load_settings
from tests.slack.conftest import Poster, block_text, click
from tests.slack.fake_slack import BOT_TOKEN, FakeSlack

AGENT_SECRET = "s" * 40


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The real node agent (`ncclbot serve agent`'s app) under uvicorn on 127.0.0.1."""
    from tools.agent.app import create_app

    audit = tmp_path / "agent-audit.jsonl"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        create_app(secret=AGENT_SECRET.encode(), audit_log=audit, force_users=()),
        host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", audit
    server.should_exit = True
    thread.join(5)


@pytest.fixture
def probe_app(slack: FakeSlack, tmp_path: Path, agent: tuple[str, Path], shared_data: Path
              ) -> Iterator[Poster]:
    from bot.slack.app import create_app
    from bot.slack.serve import http_server
    from tests.slack.conftest import SECRET

    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(f"nodes:\n  gpu-node07: {{url: '{agent[0]}'}}\n")
    settings = load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SECRET,
                             slack_api_url=slack.api_url, data_dir=shared_data,
                             sqlite_path=tmp_path / "s.sqlite3",
                             oncall_usergroup="SONCALL", nodes_file=nodes,
                             agent_secret=AGENT_SECRET)
    slack.usergroups["SONCALL"] = ["UBOB"]
    server = http_server(create_app(settings, http=True), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    poster = Poster(f"http://127.0.0.1:{server.server_address[1]}/slack/events")
    poster.settings = settings  # type: ignore[attr-defined]
    yield poster
    server.shutdown()
    server.server_close()


def test_member_probe_reaches_the_node_agent(slack: FakeSlack, probe_app: Poster,
                                             agent: tuple[str, Path]) -> None:
    from bot.slack.store import Store

    message = {"channel": "C1", "ts": "50.1", "thread_ts": "50.1"}
    value = json.dumps({"node": "gpu-node07", "tool": "probe", "preset": "quick"})
    assert probe_app.action(click("ncclbot_probe:0", value, "UBOB", message))[0] == 200
    result = slack.wait_for(lambda: next((m for m in slack.thread("C1", "50.1")
                                          if "*probe* on" in block_text(m.get("blocks"))), None))
    assert "unavailable" in block_text(result["blocks"])  # no GPU here: the agent says so
    records = [json.loads(line) for line in agent[1].read_text().splitlines()]
    assert any(r.get("user") == "slack:UBOB" for r in records), records
    rows = Store(probe_app.settings.state_db).audit_rows()  # type: ignore[attr-defined]
    assert [r["outcome"] for r in rows] == ["started", "unavailable"]
    assert rows[0]["user"] == "UBOB" and rows[0]["node"] == "gpu-node07"


def test_env_command_by_member_and_unknown_node(slack: FakeSlack, probe_app: Poster) -> None:
    status, body = probe_app.command("env gpu-node07", user="UBOB")
    assert status == 200 and "Running" in body
    slack.wait_for(lambda: next((m for m in slack.messages.values()
                                 if "*env* on" in block_text(m.get("blocks"))), None), 30)
    probe_app.command("topo nosuchnode", user="UBOB")
    slack.wait_for(lambda: next((m for m in slack.messages.values()
                                 if "nosuchnode" in block_text(m.get("blocks"))
                                 and "error" in block_text(m.get("blocks"))), None), 30)


def test_non_member_command_is_refused(slack: FakeSlack, probe_app: Poster,
                                       agent: tuple[str, Path]) -> None:
    from bot.slack.store import Store

    probe_app.command("probe gpu-node07 full", user="UEVE")
    refusal = slack.wait_call("chat.postEphemeral", lambda p: p.get("user") == "UEVE")
    assert "subteam^SONCALL" in refusal["text"]
    rows = Store(probe_app.settings.state_db).audit_rows()  # type: ignore[attr-defined]
    assert rows == [{**rows[0], "user": "UEVE", "node": "gpu-node07", "tool": "probe",
                     "preset": "full", "outcome": "refused"}]
    assert not agent[1].exists() or "UEVE" not in agent[1].read_text()
