"""The question that decides, in Slack: an uncertain answer carries it as buttons; a click is
evidence, and the thread gets the updated answer. A Chinese thread's replies are Chinese.
The real app against the local fake Slack (Socket Mode dispatch, as the adapter does)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from slack_bolt import App, BoltRequest

from bot.knowledge.incidents import load_incidents
from tests.slack.conftest import block_text, click
from tests.slack.fake_slack import FakeSlack

_IDS = itertools.count(1)
#: a real log whose cause the log does not show (determined-ai/determined#8915)
DETERMINED = "determined-8915-two-gpus-hang-together-p2p-shm-disable"


def dispatch(app: App, event: dict[str, Any]) -> int:
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1",
            "event_id": f"EvD{next(_IDS):06d}", "event": event}
    return app.dispatch(BoltRequest(body=body, mode="socket_mode")).status


def dm(ts: str, text: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "channel": "D1", "channel_type": "im", "user": "UALICE",
            "ts": ts, "text": text, "files": files, "subtype": "file_share"}


def the_log() -> bytes:
    return next(i for i in load_incidents() if i.id == DETERMINED).log.encode()


def answers(slack: FakeSlack, thread: str) -> list[dict[str, Any]]:
    return [m for m in slack.thread("D1", thread)
            if "ncclbot_actions:" in block_text(m.get("blocks"))]


def buttons(msg: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [e for b in msg.get("blocks") or [] if b["type"] == "actions"
            for e in b["elements"] if e["action_id"].startswith(prefix)]


def test_an_uncertain_answer_asks_the_deciding_question_and_a_click_updates_it(
        slack: FakeSlack, app: App) -> None:
    from bot.answering.knowledge import bundled_cards
    from bot.slack.message import message_text

    f = slack.add_file("trial.log", the_log())
    assert dispatch(app, dm("70.1", "", [f])) == 200
    first = slack.wait_for(lambda: next(iter(answers(slack, "70.1")), None))
    head = first["blocks"][0]["text"]["text"]
    assert "timed out" in head  # the header is shortened by sentence; the rest follows
    assert "Most likely" in first["blocks"][1]["text"]["text"]
    assert not any(c.title.en.rstrip(".") in message_text(first["blocks"])
                   for c in bundled_cards())  # no card whose own evidence did not match
    asked = buttons(first, "ncclbot_decide")
    assert len(asked) == 2 and {b["text"]["text"] for b in asked} == {"Yes", "No"}
    assert "fewer GPUs" in message_text(first["blocks"])
    yes = next(b for b in asked if json.loads(b["value"])["v"] == "yes")
    assert json.loads(yes["value"])["q"] == "fewer_gpus"

    app.dispatch(BoltRequest(body=click(yes["action_id"], yes["value"], "UALICE",
                                        {**first, "thread_ts": "70.1"}), mode="socket_mode"))
    updated = slack.wait_for(lambda: next((m for m in answers(slack, "70.1")
                                           if "answered" in block_text(m.get("blocks"))
                                           and m["ts"] != first["ts"]), None))
    text = message_text(updated["blocks"])
    assert "<@UALICE> answered" in text and "fewer GPUs" in text
    # the answer is evidence: the next question is another one (it asks about P2P now)
    nxt = buttons(updated, "ncclbot_decide")
    assert all(json.loads(b["value"])["q"] != "fewer_gpus" for b in nxt)
    assert any(json.loads(b["value"])["q"] == "p2p_disable" for b in nxt)
    # the old answer's buttons give way to who answered what
    old = slack.wait_for(lambda: next((m for m in slack.thread("D1", "70.1")
                                       if m["ts"] == first["ts"]
                                       and not buttons(m, "ncclbot_decide")), None))
    assert "answered" in block_text(old["blocks"])

    # answering P2P too: peer-to-peer leads
    p2p = next(b for b in nxt if json.loads(b["value"])["v"] == "yes")
    app.dispatch(BoltRequest(body=click(p2p["action_id"], p2p["value"], "UALICE",
                                        {**updated, "thread_ts": "70.1"}), mode="socket_mode"))
    last = slack.wait_for(lambda: next((m for m in answers(slack, "70.1")
                                        if "NCCL_P2P_DISABLE" in block_text(m.get("blocks"))
                                        and "answered" in block_text(m.get("blocks"))
                                        and m["ts"] not in (first["ts"], updated["ts"])), None))
    assert "p2p_pcie_topology" in block_text(last["blocks"])


def test_a_malformed_deciding_button_is_refused(slack: FakeSlack, app: App) -> None:
    msg = {"channel": "D1", "ts": "71.1", "blocks": []}
    bad = json.dumps({"a": "0123456789abcdef", "q": "rm -rf", "v": "yes"})
    app.dispatch(BoltRequest(body=click("ncclbot_decide:yes", bad, "UALICE", msg),
                             mode="socket_mode"))
    slack.wait_call("chat.postEphemeral", lambda p: "malformed" in str(p.get("text")))


def test_a_chinese_threads_details_are_chinese(slack: FakeSlack, app: App) -> None:
    f = slack.add_file("trial.log", the_log())
    assert dispatch(app, dm("72.1", "训练在 8 张卡上卡住然后超时，为什么？", [f])) == 200
    first = slack.wait_for(lambda: next(iter(answers(slack, "72.1")), None))
    assert "超时" in first["blocks"][0]["text"]["text"]
    details = next(b for b in buttons(first, "ncclbot_details"))
    assert details["text"]["text"] == "详情"
    app.dispatch(BoltRequest(body=click("ncclbot_details", details["value"], "UBOB",
                                        {**first, "thread_ts": "72.1"}), mode="socket_mode"))
    reply = slack.wait_call("chat.postMessage", lambda p: str(p.get("text", "")).startswith(
        "详情"))
    text = block_text(reply["blocks"])
    assert "步骤" in text or "还需要的信息" in text
    for english in ("*Steps*", "*Sources*", "*Suspects*", "*What would help*", "*Verify*"):
        assert english not in text
    other = next(b for b in buttons(first, "ncclbot_other_causes"))
    app.dispatch(BoltRequest(body=click("ncclbot_other_causes", other["value"], "UBOB",
                                        {**first, "thread_ts": "72.1"}), mode="socket_mode"))
    reply = slack.wait_call("chat.postMessage", lambda p: "其他可能原因" in block_text(
        p.get("blocks")))
    lines = json.loads(block_text(reply["blocks"]))[0]["text"]["text"].splitlines()[1:]
    assert lines and all(line.startswith("• ") for line in lines)  # one line each
