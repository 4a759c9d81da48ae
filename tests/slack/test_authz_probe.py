"""Probes from Slack: refused for non-members, run through a real node agent on loopback."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.slack.conftest import ONCALL, Poster, block_text, click, serving
from tests.slack.fake_slack import FakeSlack


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


def test_probe_progress_shows_the_agents_step(slack: FakeSlack, probe_settings: Any,
                                              make_app: Any) -> None:
    """A real gloo probe on the agent: the status message shows "step k/6" while it runs."""
    import re

    import pytest

    pytest.importorskip("torch")
    settings = probe_settings()
    app, _ = make_app(settings, http=True, tweak=lambda d: setattr(d, "progress_every_s", 0.2))
    with serving(app, settings) as poster:
        message = {"channel": "C1", "ts": "60.1", "thread_ts": "60.1"}
        value = json.dumps({"node": "gpu-node07", "tool": "probe", "preset": "gloo"})
        assert poster.action(click("ncclbot_probe:0", value, "UBOB", message))[0] == 200
        result = slack.wait_for(lambda: next((m for m in slack.thread("C1", "60.1")
                                              if "*probe* on" in block_text(m.get("blocks"))),
                                             None))
    from bot.slack.message import message_text

    shown = message_text(result["blocks"])
    # a verdict, a compact table, and no raw JSON in the message
    assert "peak busbw" in shown and "```" in shown and "all_reduce" in shown
    assert not re.search(r'[{\[]\s*"[^"]+"\s*:', shown)
    # the busbw chart and the whole result as files in the thread
    slack.wait_for(lambda: len(slack.of("files.completeUploadExternal")) >= 2)
    assert any(v.startswith(b"\x89PNG") for v in slack.uploads.values())
    assert any(v.lstrip().startswith(b"{") and b"busbw_gbps" in v for v in slack.uploads.values())
    steps = [c.params.get("text", "") for c in slack.of("chat.update")]
    assert any(re.search(r"probe gloo on gpu-node07: (starting 2 rank\(s\), )?step \d/6", t)
               for t in steps), steps
    statuses = json.dumps([c.params.get("blocks") for c in
                           [*slack.of("chat.postMessage"), *slack.of("chat.update")]])
    assert "<@UBOB>" in statuses and "&lt;@UBOB&gt;" not in statuses  # a mention, not text


def test_env_command_by_member_and_unknown_node(slack: FakeSlack, probe_app: Poster) -> None:
    status, body = probe_app.command("env gpu-node07", user="UBOB")
    # the group's members are not known yet: the acknowledgement promises nothing
    assert status == 200 and "Checking that you may run `env` on `gpu-node07`" in body
    slack.wait_for(lambda: next((m for m in slack.messages.values()
                                 if "*env* on" in block_text(m.get("blocks"))), None))
    status, body = probe_app.command("topo nosuchnode", user="UBOB")
    assert "Starting `topo` on `nosuchnode`" in body  # membership is cached now
    slack.wait_for(lambda: next((m for m in slack.messages.values()
                                 if "nosuchnode" in block_text(m.get("blocks"))
                                 and "error" in block_text(m.get("blocks"))), None))


def test_xid_command_by_member(slack: FakeSlack, probe_app: Poster,
                               agent: tuple[str, Path]) -> None:
    from bot.slack.store import Store

    assert probe_app.command("xid gpu-node07", user="UBOB")[0] == 200
    result = slack.wait_for(lambda: next((m for m in slack.messages.values()
                                          if "*xid* on" in block_text(m.get("blocks"))), None),
                            30)
    assert "gpu-node07" in block_text(result["blocks"])
    rows = Store(probe_app.settings.state_db).audit_rows()  # type: ignore[attr-defined]
    assert (rows[0]["tool"], rows[0]["outcome"]) == ("xid", "started")
    assert rows[1]["tool"] == "xid" and rows[1]["outcome"] != "started"
    assert "slack:UBOB" in agent[1].read_text()


def test_non_member_command_is_refused(slack: FakeSlack, probe_app: Poster,
                                       agent: tuple[str, Path]) -> None:
    from bot.slack.store import Store

    status, body = probe_app.command("probe gpu-node07 full", user="UEVE")
    assert "Running" not in body and "Starting" not in body
    refusal = slack.wait_call("chat.postEphemeral", lambda p: p.get("user") == "UEVE")
    assert "subteam^SONCALL" in refusal["text"]
    # now the group is cached: the acknowledgement itself is the refusal, said once
    status, body = probe_app.command("probe gpu-node07", user="UEVE")
    assert status == 200 and "Only" in body and "subteam^SONCALL" in body
    store = Store(probe_app.settings.state_db)  # type: ignore[attr-defined]
    slack.wait_for(lambda: len(store.audit_rows()) == 2)
    rows = store.audit_rows()
    assert rows[0] == {**rows[0], "user": "UEVE", "node": "gpu-node07", "tool": "probe",
                       "preset": "full", "outcome": "refused"}
    assert rows[1] == {**rows[1], "user": "UEVE", "preset": "quick", "outcome": "refused"}
    time.sleep(0.5)
    assert len([c for c in slack.of("chat.postEphemeral") if c.params.get("user") == "UEVE"]) == 1
    assert not agent[1].exists() or "UEVE" not in agent[1].read_text()


def test_rate_limited_and_busy_are_audited(slack: FakeSlack, probe_settings: Any,
                                           make_app: Any) -> None:
    from bot.slack.store import Store

    settings = probe_settings(slack_probes_per_user=1, slack_rate_window_s=3600,
                              oncall_users=[ONCALL])
    app, deps = make_app(settings, http=True)
    with serving(app, settings) as poster:
        poster.command("topo gpu-node07", user="UBOB")
        slack.wait_for(lambda: next((m for m in slack.messages.values()
                                     if "*topo* on" in block_text(m.get("blocks"))), None))
        poster.command("env gpu-node07", user="UBOB")
        limited = slack.wait_call("chat.postEphemeral", lambda p: "Not now" in p["text"])
        assert "too many diagnostics" in limited["text"]
        assert deps.limits.claim_node("gpu-node07")  # a diagnostic is running there
        poster.command("xid gpu-node07", user=ONCALL)
        busy = slack.wait_call("chat.postEphemeral", lambda p: "already running" in p["text"])
        assert busy["user"] == ONCALL
    rows = Store(settings.state_db).audit_rows()
    assert [(r["user"], r["tool"], r["outcome"]) for r in rows][2:] == [
        ("UBOB", "env", "rate_limited"), (ONCALL, "xid", "busy")]
    assert rows[0]["outcome"] == "started"


def test_usergroup_lookup_is_cached(slack: FakeSlack, probe_app: Poster) -> None:
    message = {"channel": "C1", "ts": "51.1", "thread_ts": "51.1"}
    value = json.dumps({"node": "gpu-node07", "tool": "probe", "preset": "quick"})
    for user in ("UMALLORY", "UEVE", "UMALLORY"):
        probe_app.action(click("ncclbot_probe:0", value, user, message))
    slack.wait_for(lambda: len(slack.of("chat.postEphemeral")) == 3)
    assert len(slack.of("usergroups.users.list")) == 1


def test_a_replayed_slash_command_or_button_runs_nothing_twice(
        slack: FakeSlack, probe_app: Poster, agent: tuple[str, Path]) -> None:
    """Issue 18: a byte-identical replay of a signed `/nccl env` (and of a button click),
    sent after the first one finished and within the signature's lifetime, is acknowledged
    and dropped."""
    import urllib.parse

    from bot.slack.store import Store
    from tests.slack.conftest import sign

    def results(tool: str) -> list[dict[str, Any]]:
        return [m for m in slack.messages.values() if f"*{tool}* on" in block_text(
            m.get("blocks"))]

    body = urllib.parse.urlencode({
        "command": "/nccl", "text": "env gpu-node07", "user_id": "UBOB", "channel_id": "C1",
        "team_id": "T1", "response_url": "http://127.0.0.1:9/none", "trigger_id": "replay1"})
    headers = sign(body)
    message = {"channel": "C1", "ts": "52.1", "thread_ts": "52.1"}
    value = json.dumps({"node": "gpu-node07", "tool": "xid", "preset": None})
    click_body = urllib.parse.urlencode({"payload": json.dumps(
        click("ncclbot_probe:0", value, "UBOB", message))})
    signed = sign(click_body)
    for _ in range(2):  # the request, then its replay once the first has finished
        assert probe_app.post(body, "application/x-www-form-urlencoded", headers)[0] == 200
        slack.wait_for(lambda: results("env"))
        assert probe_app.post(click_body, "application/x-www-form-urlencoded", signed)[0] == 200
        slack.wait_for(lambda: results("xid"))
        time.sleep(1.0)
    rows = Store(probe_app.settings.state_db).audit_rows()  # type: ignore[attr-defined]
    assert [(r["tool"], r["outcome"]) for r in rows if r["outcome"] == "started"] == [
        ("env", "started"), ("xid", "started")]
    assert len(results("env")) == 1 and len(results("xid")) == 1


def test_probes_only_in_allowed_channels_and_malformed_buttons_audited(
        slack: FakeSlack, probe_settings: Any, make_app: Any) -> None:
    from bot.slack.store import Store

    settings = probe_settings(probe_channels=["COPS"], oncall_users=[ONCALL])
    app, _ = make_app(settings, http=True)
    with serving(app, settings) as poster:
        poster.command("env gpu-node07", user=ONCALL, channel="CRANDOM")
        told = slack.wait_call("chat.postEphemeral", lambda p: "only in" in p["text"])
        assert "<#COPS>" in told["text"]
        message = {"channel": "COPS", "ts": "53.1", "thread_ts": "53.1"}
        poster.action(click("ncclbot_probe:0", "{not json", ONCALL, message))
        slack.wait_call("chat.postEphemeral", lambda p: "malformed" in p["text"])
    rows = Store(settings.state_db).audit_rows()
    assert [(r["channel"], r["outcome"]) for r in rows] == [("CRANDOM", "channel"),
                                                           ("COPS", "invalid")]
