"""Socket Mode: the same listeners driven through the app's dispatch (no websocket)."""

from __future__ import annotations

import gzip
from typing import Any

import pytest
from slack_bolt import App, BoltRequest

from tests.slack.conftest import block_text, crash_log
from tests.slack.fake_slack import FakeSlack


@pytest.fixture
def app(settings) -> App:
    from bot.slack.app import create_app

    return create_app(settings)


def dispatch(app: App, event: dict[str, Any]) -> int:
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1",
            "event_id": "Ev1", "event": event}
    return app.dispatch(BoltRequest(body=body, mode="socket_mode")).status


def dm(ts: str, text: str = "", files: list | None = None, thread_ts: str | None = None
       ) -> dict[str, Any]:
    e = {"type": "message", "channel": "D1", "channel_type": "im", "user": "UALICE", "ts": ts,
         "text": text}
    if files:
        e.update(files=files, subtype="file_share")
    if thread_ts:
        e["thread_ts"] = thread_ts
    return e


def final(slack: FakeSlack, channel: str, thread_ts: str, needle: str) -> dict[str, Any]:
    return slack.wait_for(lambda: next((m for m in slack.thread(channel, thread_ts)
                                        if needle in block_text(m.get("blocks"))), None))


def test_dm_with_gz_log_then_dedup_then_followup(slack: FakeSlack, app: App) -> None:
    f = slack.add_file("rank2.log.gz", gzip.compress(crash_log()))
    assert dispatch(app, dm("10.1", "训练卡住了，为什么？", [f])) == 200
    answer = final(slack, "D1", "10.1", "ncclbot_feedback_up")
    text = block_text(answer["blocks"])
    assert "rank_crashed" in text and "修复建议" in text and "Remediation" not in text  # zh

    # the same content again in the thread, under another name: not analyzed twice
    again = slack.add_file("copy.log.gz", gzip.compress(crash_log()))
    dispatch(app, dm("10.2", "", [again], thread_ts="10.1"))
    dup = final(slack, "D1", "10.1", "Already analyzed")
    assert "rank2.log.gz" in block_text(dup["blocks"])
    assert len([m for m in slack.thread("D1", "10.1") if "ncclbot_feedback_up" in
                block_text(m.get("blocks"))]) == 1

    # a follow-up question keeps the thread's logs
    dispatch(app, dm("10.3", "and what should I check first?", thread_ts="10.1"))
    slack.wait_for(lambda: len([m for m in slack.thread("D1", "10.1") if "rank_crashed" in
                                block_text(m.get("blocks"))]) >= 2)


def test_rejected_files_get_a_clear_message(slack: FakeSlack, app: App, settings) -> None:
    binary = slack.add_file("core.log", b"\x7fELF\x00\x00\x01" * 2000)
    image = slack.add_file("screenshot.png", b"\x89PNG....", mimetype="image/png",
                           filetype="png")
    huge = slack.add_file("huge.log", b"x")
    huge["size"] = settings.slack_max_file_bytes + 1
    dispatch(app, dm("20.1", "look", [binary, image, huge]))
    msg = final(slack, "D1", "20.1", "No log accepted")
    text = block_text(msg["blocks"])
    assert "binary" in text and "not a log file" in text and "limit" in text
    assert slack.downloads == 1  # only the one that passed the pre-check was fetched


def test_mention_in_thread_is_not_answered_twice(slack: FakeSlack, app: App) -> None:
    f = slack.add_file("a.log", crash_log())
    base = {"channel": "C9", "user": "UALICE", "ts": "30.1", "text": "<@UBOT> why?",
            "files": [f]}
    dispatch(app, {"type": "app_mention", **base})
    final(slack, "C9", "30.1", "ncclbot_feedback_up")
    # the message event for the same mention is skipped by the message listener
    dispatch(app, {"type": "message", "channel_type": "channel", **base, "thread_ts": "30.1"})
    import time

    time.sleep(1.0)
    assert slack.downloads == 1


def test_long_answer_is_truncated_and_full_report_attached(slack: FakeSlack, settings) -> None:
    from bot.slack.app import build_deps, create_app, web_client

    client = web_client(settings)
    deps = build_deps(settings, client)
    long_answer = {"verdict": "diagnosed", "summary": "S", "probes": [],
                   "diagnosis": {"root_causes": [{"category": "rank_crashed", "card": "c",
                                                  "confidence": 0.9, "evidence": []}],
                                 "suspects": []},
                   "remediation": {"en": ["step " + "x" * 500] * 40, "zh": ["步骤"] * 3},
                   "citations": []}
    deps.answer = lambda q, paths, tid: long_answer
    app = create_app(settings, client=client, deps=deps)
    dispatch(app, dm("40.1", "why"))
    msg = final(slack, "D1", "40.1", "full report is attached")
    assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in msg["blocks"])
    assert len(msg["blocks"]) <= 50
    done = slack.wait_call("files.completeUploadExternal")
    assert done.get("thread_ts") == "40.1"
    assert any(b"step xxx" in v for v in slack.uploads.values())
