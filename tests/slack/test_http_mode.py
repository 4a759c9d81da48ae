"""The app over real HTTP: signed events, slash commands and buttons against a local Slack."""

from __future__ import annotations

import json
import re
import time

from bot.slack.message import FIRST_MAX, message_text
from tests.slack.conftest import ONCALL, Poster, block_text, click, crash_log, sign
from tests.slack.fake_slack import FakeSlack


def _answer(slack: FakeSlack, channel: str, thread_ts: str) -> dict:
    return slack.wait_for(lambda: next(
        (m for m in slack.thread(channel, thread_ts) if "ncclbot_details" in block_text(
            m.get("blocks"))), None), timeout=90)


def _answers(slack: FakeSlack, channel: str, thread_ts: str) -> list[dict]:
    return [m for m in slack.thread(channel, thread_ts)
            if "ncclbot_details" in block_text(m.get("blocks"))]


def test_mention_with_log_gets_threaded_answer(slack: FakeSlack, http_app: Poster) -> None:
    f = slack.add_file("train.log", crash_log())
    status, _ = http_app.event({"type": "app_mention", "user": "UALICE", "channel": "C1",
                                "ts": "1699999999.000100", "text": "<@UBOT> why did it hang?",
                                "files": [f]})
    assert status == 200
    answer = _answer(slack, "C1", "1699999999.000100")
    text = block_text(answer["blocks"])
    shown = message_text(answer["blocks"])
    # a short first message in one language: verdict and suspect up front, three steps
    assert answer["blocks"][0]["type"] == "header" and len(shown) <= FIRST_MAX
    header = answer["blocks"][0]["text"]["text"]
    assert "rank 2" in header and "gpu-node07" in header  # suspect in header
    assert "rank_crashed" in shown and "rank 2 on gpu-node07" in shown
    assert "What to do" in shown and "建议步骤" not in shown and "Sources" not in shown
    # buttons: details, other causes, the other language, the suspect's node, feedback
    assert re.search(r"Run (probe|env|topo|xid) on gpu-node07", text)
    assert "Other possible causes" in text and "中文" in text
    assert slack.downloads == 1
    assert slack.of("reactions.add")
    # the status message was posted first, then replaced by the answer (one message)
    assert len(slack.thread("C1", "1699999999.000100")) == 1
    # details on request: the evidence lines, every step, verify steps, titled sources
    ids = {e["action_id"]: e["value"] for b in answer["blocks"] if b["type"] == "actions"
           for e in b["elements"]}
    http_app.action(click("ncclbot_details", ids["ncclbot_details"], "UALICE", answer))
    details = slack.wait_call("chat.postMessage", lambda p: str(p.get("text", "")).startswith(
        "Details"))
    more = block_text(details["blocks"])
    assert details["thread_ts"] == "1699999999.000100"
    assert "OutOfMemoryError" in more and "Verify" in more and "Sources" in more
    assert "<https://" in more and "|[1]>" not in more  # links named, not numbered
    # the other language on request
    http_app.action(click("ncclbot_other_language", ids["ncclbot_other_language"], "UALICE",
                          answer))
    zh = slack.wait_call("chat.postMessage", lambda p: "建议步骤" in block_text(p.get("blocks")))
    assert zh["thread_ts"] == "1699999999.000100"


def test_forged_or_stale_signature_is_rejected(slack: FakeSlack, http_app: Poster) -> None:
    event = {"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "1.1",
             "text": "<@UBOT> hi"}
    body = json.dumps({"type": "event_callback", "event": event, "event_id": "Ev1"})
    forged = sign(body, secret="not-the-secret")
    assert http_app.post(body, "application/json", forged)[0] == 401
    stale = sign(body, ts=int(time.time()) - 3600)
    assert http_app.post(body, "application/json", stale)[0] == 401
    assert http_app.post(body, "application/json", {})[0] == 401
    time.sleep(0.5)
    assert not slack.of("chat.postMessage")


def test_slash_help_and_ask(slack: FakeSlack, http_app: Poster) -> None:
    status, body = http_app.command("help")
    assert status == 200 and "/nccl probe NODE" in body
    status, _ = http_app.command("ask what does NCCL_P2P_DISABLE do?")
    assert status == 200
    asked = slack.wait_call("chat.postMessage", lambda p: "asked:" in (p.get("text") or ""))
    assert "NCCL_P2P_DISABLE" in asked["text"]
    posted = next(m for m in slack.messages.values() if "asked:" in (m.get("text") or ""))
    # the real answer (not the status message) lands in the thread under the question
    answer = _answer(slack, "C1", posted["ts"])
    text = block_text(answer["blocks"])
    assert "p2p_pcie_topology" in text and "Details" in text
    assert "Attach the crash log" not in text  # a question alone is answered, not refused


def test_retried_event_is_answered_once(slack: FakeSlack, http_app: Poster) -> None:
    f = slack.add_file("train.log", crash_log())
    event = {"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "8.8",
             "text": "<@UBOT> why?", "files": [f]}
    assert http_app.event(event, event_id="EvRETRY1")[0] == 200
    # Slack did not see the ack in time and sends the same event again, twice
    assert http_app.event(event, event_id="EvRETRY1", retry=1)[0] == 200
    assert http_app.event(event, event_id="EvRETRY1", retry=2)[0] == 200
    _answer(slack, "C1", "8.8")
    time.sleep(1.0)
    answers = _answers(slack, "C1", "8.8")
    assert len(answers) == 1 and len(slack.thread("C1", "8.8")) == 1
    assert slack.downloads == 1 and len(slack.of("reactions.add")) == 1
    # another event (another id) for the same thread is still answered
    http_app.event({**event, "ts": "8.9", "thread_ts": "8.8", "files": [],
                    "text": "<@UBOT> and now?"})
    slack.wait_for(lambda: len(_answers(slack, "C1", "8.8")) == 2)


def test_lang_command_sets_user_and_channel_preferences(slack: FakeSlack, http_app: Poster
                                                        ) -> None:
    status, body = http_app.command("lang zh", user="UALICE")
    assert status == 200 and "zh" in body
    status, body = http_app.command("lang klingon", user="UALICE")
    assert "Usage" in body
    status, body = http_app.command("lang en channel", user="UBOB", channel="C7")
    assert "this channel" in body
    f = slack.add_file("train.log", crash_log())
    http_app.event({"type": "app_mention", "user": "UALICE", "channel": "C7", "ts": "9.1",
                    "text": "<@UBOT> why did it hang?", "files": [f]})
    mine = block_text(_answer(slack, "C7", "9.1")["blocks"])
    assert "建议步骤" in mine and "What to do" not in mine  # the user's zh beats the channel
    g = slack.add_file("train.log", crash_log("gpu-node09"))
    http_app.event({"type": "app_mention", "user": "UCAROL", "channel": "C7", "ts": "9.2",
                    "text": "<@UBOT> 为什么卡住了？", "files": [g]})
    theirs = block_text(_answer(slack, "C7", "9.2")["blocks"])
    assert "What to do" in theirs and "建议步骤" not in theirs  # the channel's en
    status, body = http_app.command("lang auto", user="UALICE")
    assert "auto" in body


def test_probe_button_by_non_member_is_refused_and_audited(
        slack: FakeSlack, http_app: Poster, settings) -> None:
    from bot.slack.store import Store

    slack.usergroups["SONCALL"] = ["UBOB"]
    f = slack.add_file("train.log", crash_log())
    http_app.event({"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "5.5",
                    "text": "<@UBOT> help", "files": [f]})
    answer = _answer(slack, "C1", "5.5")
    value = json.dumps({"node": "gpu-node07", "tool": "probe", "preset": "quick", "a": "x"})
    status, _ = http_app.action(click("ncclbot_probe:0", value, "UMALLORY", answer))
    assert status == 200
    refusal = slack.wait_call("chat.postEphemeral", lambda p: p.get("user") == "UMALLORY")
    assert "Only" in refusal["text"] and f"<@{ONCALL}>" in refusal["text"]
    assert "subteam^SONCALL" in refusal["text"]
    rows = Store(settings.state_db).audit_rows()
    assert rows[-1]["user"] == "UMALLORY" and rows[-1]["outcome"] == "refused"
    assert rows[-1]["node"] == "gpu-node07" and rows[-1]["preset"] == "quick"
    assert rows[-1]["channel"] == "C1"
    assert slack.of("usergroups.users.list")


def test_feedback_and_other_causes_buttons(slack: FakeSlack, http_app: Poster, settings,
                                           ) -> None:
    from bot.slack.store import Store

    f = slack.add_file("train.log", crash_log())
    http_app.event({"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "7.7",
                    "text": "<@UBOT>", "files": [f]})
    answer = _answer(slack, "C1", "7.7")
    actions = next(b for b in answer["blocks"] if b["type"] == "actions")
    ids = {e["action_id"]: e["value"] for e in actions["elements"]}
    answer_id = ids["ncclbot_feedback_up"]
    http_app.action(click("ncclbot_other_causes", answer_id, "UALICE", answer))
    other = slack.wait_call("chat.postMessage", lambda p: p.get("text") == "Other possible "
                            "causes")
    listed = block_text(other["blocks"])
    assert other["thread_ts"] == "7.7" and listed.count("• ") >= 2  # one line per cause
    assert http_app.action(click("ncclbot_feedback_down", answer_id, "UBOB", answer))[0] == 200
    modal = slack.wait_call("views.open")
    view = modal["view"]
    submit = {"type": "view_submission", "user": {"id": "UBOB"}, "team": {"id": "T1"},
              "api_app_id": "A1", "view": {**view, "id": "V1", "state": {"values": {
                  "reason": {"text": {"type": "plain_text_input", "value": "wrong node"}}}}}}
    assert http_app.action(submit)[0] == 200
    http_app.action(click("ncclbot_feedback_up", answer_id, "UALICE", answer))
    # the buttons give way to a line saying it was noted
    updated = slack.wait_call("chat.update", lambda p: "found this helpful" in block_text(
        p.get("blocks")))
    assert "ncclbot_feedback_up" not in block_text(updated["blocks"])
    store = Store(settings.state_db)
    slack.wait_for(lambda: store.feedback_reasons())
    assert store.feedback_report() == [("rank_crashed", store.feedback_report()[0][1], 1, 1)]
    assert store.feedback_reasons()[0][2] == "wrong node"


def _raw(url: str, head: bytes, body_chunks: int = 0, chunk: bytes = b"") -> bytes:
    """Send a raw request (head, then up to `body_chunks` chunks while the server listens);
    the status line the server answers with."""
    import socket
    from urllib.parse import urlsplit

    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=20) as sock:
        sock.sendall(head)
        try:
            for _ in range(body_chunks):
                sock.sendall(chunk)
        except OSError:
            pass  # the server answered and closed: what we want
        sock.settimeout(20)
        data = b""
        try:
            while b"\r\n" not in data:
                got = sock.recv(4096)
                if not got:
                    break
                data += got
        except OSError:
            pass
    return data.split(b"\r\n", 1)[0]


def _rss_mb() -> float:
    from pathlib import Path

    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_hostile_requests_get_a_clean_4xx(slack: FakeSlack, http_app: Poster) -> None:
    """Issue 18: a negative or non-numeric Content-Length, a huge body, a non-numeric
    timestamp and a non-JSON body are refused with a 4xx, never read into memory or 500."""
    url = http_app.url
    path = "/slack/events"
    host = b"Host: 127.0.0.1\r\n"
    before = _rss_mb()
    status = _raw(url, b"POST " + path.encode() + b" HTTP/1.1\r\n" + host
                  + b"Content-Type: application/json\r\nContent-Length: -1\r\n\r\n",
                  body_chunks=300, chunk=b"x" * 2**20)  # up to 300 MiB behind it
    assert status.split(b" ")[1].startswith(b"4"), status
    assert _rss_mb() - before < 50
    status = _raw(url, b"POST " + path.encode() + b" HTTP/1.1\r\n" + host
                  + b"Content-Length: abc\r\n\r\n")
    assert status.split(b" ")[1].startswith(b"4"), status
    big = _raw(url, b"POST " + path.encode() + b" HTTP/1.1\r\n" + host
               + b"Transfer-Encoding: chunked\r\n\r\n",
               body_chunks=8, chunk=b"100000\r\n" + b"y" * 0x100000 + b"\r\n")
    assert big.split(b" ")[1] == b"413", big
    body = json.dumps({"type": "event_callback", "event": {"type": "app_mention"}})
    assert http_app.post(body, "application/json", {**sign(body), "x-slack-request-timestamp":
                                                     "soon"})[0] == 400
    junk = "this is not json {"
    assert http_app.post(junk, "application/json")[0] // 100 == 4
