"""Slack's door, end to end: every planted secret shape (the whole corpus, with every
fragment of a pass phrase or token) is gone from all that the real app posts (messages,
details, the full report file); malformed answer buttons are audited."""

from __future__ import annotations

import json
from typing import Any

from slack_bolt import BoltRequest

from tests.slack.conftest import click, script_answers
from tests.slack.fake_slack import FakeSlack
from tests.slack.test_socket_mode import dispatch, dm, final
from tests.test_redaction_corpus import PLANTED, leaked


def _answer_quoting(lines: list[str]) -> dict[str, Any]:
    """An answer that quotes every line in every field a person sees (long enough that
    the details are shortened and the full report goes up as a file)."""
    return {"verdict": "diagnosed", "summary": lines[0], "explanation": "\n".join(lines),
            "diagnosis": {"root_causes": [{
                "category": "rank_crashed", "card": "c", "confidence": 0.8,
                "certainty": "likely", "title": {"en": lines[1]},
                "evidence": [{"file": "train.log", "line": i, "text": t}
                             for i, t in enumerate(lines * 4, 1)]}],
                "suspects": [{"rank": 0, "host": "gpu-node07", "reason": lines[2]}]},
            "remediation": {"en": lines * 2}, "notes": lines, "citations": []}


def test_no_planted_shape_reaches_slack(slack: FakeSlack, make_app: Any) -> None:
    lines = [p["line"] for p in PLANTED]
    app, _ = make_app(tweak=lambda deps: script_answers(deps, _answer_quoting(lines)))
    dispatch(app, dm("95.1", "why did it fail? " + " ".join(lines[-10:])))
    first = final(slack, "D1", "95.1", "ncclbot_details")
    ids = {e["action_id"]: e["value"] for b in first["blocks"] if b["type"] == "actions"
           for e in b["elements"]}
    app.dispatch(BoltRequest(body=click("ncclbot_details", ids["ncclbot_details"], "UALICE",
                                        {**first, "thread_ts": "95.1"}), mode="socket_mode"))
    slack.wait_call("chat.postMessage", lambda p: str(p.get("text", "")).startswith("Details"))
    slack.wait_call("upload", lambda p: True)
    posted = json.dumps([c.params for c in slack.calls], ensure_ascii=False)
    uploaded = "\n".join(b.decode("utf-8", "replace") for b in slack.uploads.values())
    assert posted.count("[REDACTED]") >= 40 and "[REDACTED]" in uploaded
    assert leaked(posted) == []
    assert leaked(uploaded) == [], [ln for ln in uploaded.splitlines() if leaked(ln)][:8]


def test_malformed_answer_buttons_are_audited(slack: FakeSlack, make_app: Any,
                                              settings: Any) -> None:
    from bot.slack.store import Store

    app, _ = make_app()
    message = {"channel": "C1", "ts": "96.1", "thread_ts": "96.1"}
    values = [("ncclbot_details", "x" * 5000), ("ncclbot_other_language", "{not json"),
              ("ncclbot_other_language", '["a", 1]'),
              ("ncclbot_other_language", '{"a": "../../etc", "lang": "zh"}'),
              ("ncclbot_other_causes", "DROP TABLE answers; token=hunter2hunter2")]
    for action_id, value in values:
        app.dispatch(BoltRequest(body=click(action_id, value, "UMALLORY", message),
                                 mode="socket_mode"))
    slack.wait_for(lambda: len(slack.of("chat.postEphemeral")) >= len(values) or None,
                   60)
    rows = Store(settings.state_db).audit_rows()
    assert sorted((r["user"], r["tool"], r["outcome"]) for r in rows) == sorted(
        [("UMALLORY", "details", "invalid"), ("UMALLORY", "other_language", "invalid"),
         ("UMALLORY", "other_language", "invalid"), ("UMALLORY", "other_language", "invalid"),
         ("UMALLORY", "other_causes", "invalid")])
    assert all(len(r["detail"]) < 300 for r in rows)
    assert not any("hunter2hunter2" in r["detail"] for r in rows)
    told = [c.params["text"] for c in slack.of("chat.postEphemeral")]
    assert all("malformed" in t for t in told)
    # a well-formed id of an answer that is gone is not malformed: the person is told
    app.dispatch(BoltRequest(body=click("ncclbot_details", "0123456789abcdef", "UALICE",
                                        message), mode="socket_mode"))
    slack.wait_call("chat.postEphemeral", lambda p: "no longer have" in p["text"])
    assert len(Store(settings.state_db).audit_rows()) == len(values)


def test_respond_through_the_response_url_is_redacted(slack: FakeSlack, make_app: Any) -> None:
    """bolt's `respond()` posts to a command's or button's response_url, not through the
    Web API client: the app hands listeners a redacting one."""
    from bot.slack.redacting import RedactingRespond

    app, _ = make_app()
    body = {"command": "/nccl", "text": "env gpu-node07", "user_id": "UALICE",
            "channel_id": "C1", "team_id": "T1", "response_url": slack.api_url + "hook"}
    req = BoltRequest(body=body, mode="socket_mode")
    app._init_context(req)
    respond = req.context.respond
    assert isinstance(respond, RedactingRespond)
    lines = [p["line"] for p in PLANTED]
    respond(text="\n".join(lines), response_type="ephemeral",
            blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": lines[-1]}}])
    posted = json.dumps(slack.wait_call("hook"), ensure_ascii=False)
    assert "[REDACTED]" in posted and leaked(posted) == []


def test_a_slash_commands_reply_is_redacted(slack: FakeSlack, make_app: Any,
                                            settings: Any) -> None:
    """The acknowledgement of `/nccl` (the HTTP response Slack shows the person) echoes
    what was typed: without its secrets."""
    from tests.slack.conftest import serving

    token = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
    app, _ = make_app(settings, http=True)
    with serving(app, settings) as poster:
        status, body = poster.command(f"env {token}")
    assert status == 200 and body
    assert token not in body and "[REDACTED]" in body
