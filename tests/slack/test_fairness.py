"""Fairness in Slack: one person's backlog waits its turn (and says so) while others are
answered; a hung LLM holds back no first answer. Events gate the work, not timers."""

from __future__ import annotations

import threading
from typing import Any

from bot.answering.contract import Answer
from bot.answering.troubleshooter import Question, Troubleshooter
from tests.slack.conftest import block_text, crash_log, serving
from tests.slack.fake_slack import FakeSlack


def _answered(slack: FakeSlack, ts: str, needle: str = "ncclbot_feedback_up") -> Any:
    return slack.wait_for(lambda: next((m for m in slack.thread("C1", ts)
                                        if needle in block_text(m.get("blocks"))), None), 90)


def _mention(poster: Any, slack: FakeSlack, user: str, ts: str, host: str) -> None:
    f = slack.add_file(f"{host}.log", crash_log(host))
    poster.event({"type": "app_mention", "user": user, "channel": "C1", "ts": ts,
                  "text": "<@UBOT> why?", "files": [f]})


def test_one_users_backlog_waits_its_turn_and_is_told(slack: FakeSlack, settings: Any,
                                                      make_app: Any) -> None:
    s = settings.model_copy(update={"slack_workers": 2, "slack_jobs_per_user": 1,
                                    "slack_queue_per_user": 1})
    held, gate = threading.Event(), threading.Event()

    def tweak(deps: Any) -> None:
        real = deps.troubleshooter.answer

        def answer(q: Question, **kw: Any) -> Answer:
            if q.thread_id == "C1:10.1":  # the heavy upload: held until the test lets go
                held.set()
                gate.wait(120)
            return real(q, **kw)

        deps.troubleshooter.answer = answer

    app, _ = make_app(s, http=True, tweak=tweak)
    with serving(app, s) as poster:
        _mention(poster, slack, "UBOMB", "10.1", "gpu-node01")
        assert held.wait(90)
        _mention(poster, slack, "UBOMB", "11.1", "gpu-node02")
        queued = slack.wait_call("chat.postEphemeral", lambda p: "queued" in p.get("text", ""))
        assert queued["user"] == "UBOMB" and "your earlier request" in queued["text"]
        _mention(poster, slack, "UBOMB", "12.1", "gpu-node03")
        refused = slack.wait_call("chat.postEphemeral",
                                  lambda p: "earlier uploads" in p.get("text", ""))
        assert refused["user"] == "UBOMB" and refused.get("thread_ts") == "12.1"
        # another person is answered while the first upload is still being worked on
        _mention(poster, slack, "UALICE", "20.1", "gpu-node04")
        _answered(slack, "20.1")
        assert not gate.is_set() and not _has_answer(slack, "10.1")
        gate.set()
        _answered(slack, "10.1")
        _answered(slack, "11.1")  # the queued one, in turn
    assert slack.thread("C1", "12.1") == []  # refused: not worked on, nothing posted


def _has_answer(slack: FakeSlack, ts: str) -> bool:
    return any("ncclbot_feedback_up" in block_text(m.get("blocks"))
               for m in slack.thread("C1", ts))


def test_a_hung_llm_holds_back_no_first_answer(slack: FakeSlack, settings: Any,
                                               make_app: Any) -> None:
    """20 mentions at once while every LLM call hangs: each gets its deterministic answer
    before any LLM call returns (the LLM's accounts have their own workers)."""
    s = settings.model_copy(update={"llm_provider": "openai", "llm_model": "m"})
    gate, calls = threading.Event(), []

    def respond(question: str, **kw: Any) -> Answer:
        calls.append(question)
        gate.wait(120)
        return Answer(verdict="unknown", summary="The LLM's late account.",
                      explanation="The LLM's late account.", notes=[])

    app, _ = make_app(s, http=True, tweak=lambda d: setattr(
        d, "troubleshooter", Troubleshooter(s, respond=respond)))
    threads = [f"{30 + i}.1" for i in range(20)]
    with serving(app, s) as poster:
        log = slack.add_file("train.log", crash_log())
        for i, ts in enumerate(threads):
            poster.event({"type": "app_mention", "user": f"U{i:03d}", "channel": "C1",
                          "ts": ts, "text": "<@UBOT> why?", "files": [log]})
        for ts in threads:
            _answered(slack, ts)
        assert not gate.is_set() and calls  # the LLM was asked, and is still hanging
        gate.set()
