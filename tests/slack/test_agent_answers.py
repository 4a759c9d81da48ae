"""What the LLM agent returns, rendered in Slack: the explanation, its suggested probes as
on-call buttons (same authorisation and audit as every probe), and a failing backend."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bot.answering.contract import Answer
from bot.answering.troubleshooter import Troubleshooter
from tests.slack.conftest import block_text, click, crash_log, serving
from tests.slack.fake_slack import FakeSlack

AGENT_ANSWER = {
    "verdict": "diagnosed", "summary": "Most likely: rank_crashed (82%) - CUDA OOM on rank 2.",
    "explanation": "Rank 2 ran out of GPU memory and died; the other ranks then waited for it "
                   "in the all-reduce until the watchdog fired.",
    "diagnosis": {"root_causes": [{"category": "rank_crashed", "card": "cuda-oom",
                                   "confidence": 0.82, "evidence": []}],
                  "suspects": [{"rank": 2, "host": "gpu-node07", "reason": "OOM"}]},
    "remediation": {"en": ["Lower the batch size."], "zh": ["减小批大小。"]},
    "citations": [], "probes": ["probe"],
    "suggested_probes": [
        {"node": "gpu-node07", "preset": "full", "reason": "check the links of the OOM rank",
         "status": "proposed", "needs_confirmation": True},
        {"node": "gpu-node08", "preset": "quick", "reason": "already run", "status": "confirmed",
         "needs_confirmation": False}],
    "llm": {"used": True},
}


def _answer_msg(slack: FakeSlack, channel: str, ts: str, needle: str = "ncclbot_feedback_up"
                ) -> dict[str, Any]:
    return slack.wait_for(lambda: next((m for m in slack.thread(channel, ts) if
                                        needle in block_text(m.get("blocks"))), None), 60)


def test_agent_explanation_and_suggested_probes(slack: FakeSlack, probe_settings: Any,
                                                make_app: Any, agent: tuple[str, Path]) -> None:
    from bot.slack.store import Store

    settings = probe_settings(llm_provider="openai", llm_model="m")
    seen: list[dict[str, Any]] = []

    def respond(question: str, **kw: Any) -> Answer:
        seen.append({"question": question, **kw})
        return Answer.model_validate(AGENT_ANSWER)

    app, _ = make_app(settings, http=True, tweak=lambda d: setattr(
        d, "troubleshooter", Troubleshooter(settings, respond=respond)))
    with serving(app, settings) as poster:
        f = slack.add_file("train.log", crash_log())
        poster.event({"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "90.1",
                      "text": "<@UBOT> why?", "files": [f]})
        first = _answer_msg(slack, "C1", "90.1")  # the deterministic answer, posted first
        assert "Rank 2 ran out" not in block_text(first["blocks"])
        # then the agent's account in the thread, with its proposals as buttons
        answer = _answer_msg(slack, "C1", "90.1", "Rank 2 ran out of GPU memory")
        assert seen[0]["question"] == "why?" and seen[0]["thread_id"] == "C1:90.1"
        assert len(seen[0]["attachments"]) == 1
        # the agent's thread state lives in the bot's state database (the SQLite file)
        from bot.state.threads import SqlThreadStore

        assert isinstance(seen[0]["store"], SqlThreadStore)
        assert seen[0]["store"].path == settings.state_db
        sections = [b["text"]["text"] for b in answer["blocks"] if b["type"] == "section"]
        assert any(t.startswith("Rank 2 ran out of GPU memory") for t in sections)
        actions = next(b for b in answer["blocks"] if b["type"] == "actions")
        buttons = {e["text"]["text"]: json.loads(e["value"]) for e in actions["elements"]
                   if e["action_id"].startswith("ncclbot_probe")}
        # the agent's suggestion (preset full), then the suspect host; not the one already run
        assert list(buttons) == ["Run probe full on gpu-node07", "Run probe on gpu-node07"]
        assert "gpu-node08" not in json.dumps(buttons)
        value = json.dumps(buttons["Run probe full on gpu-node07"])

        # a non-member is refused and audited; a member reaches the node agent
        poster.action(click("ncclbot_probe:0", value, "UEVE", answer))
        slack.wait_call("chat.postEphemeral", lambda p: p.get("user") == "UEVE")
        poster.action(click("ncclbot_probe:0", value, "UBOB", answer))
        slack.wait_for(lambda: next((m for m in slack.thread("C1", "90.1")
                                     if "*probe* on" in block_text(m.get("blocks"))), None), 60)
    rows = Store(settings.state_db).audit_rows()
    assert [(r["user"], r["preset"], r["outcome"]) for r in rows][:2] == [
        ("UEVE", "full", "refused"), ("UBOB", "full", "started")]
    assert rows[2]["user"] == "UBOB" and rows[2]["outcome"] not in ("started", "refused")
    assert "slack:UBOB" in agent[1].read_text()


def test_a_failing_backend_still_answers(slack: FakeSlack, settings: Any, make_app: Any
                                         ) -> None:
    llm = settings.model_copy(update={"llm_provider": "openai"})

    def respond(question: str, **kw: Any) -> Answer:
        raise ImportError("No module named 'langchain_openai'")

    app, _ = make_app(llm, http=True, tweak=lambda d: setattr(
        d, "troubleshooter", Troubleshooter(llm, respond=respond)))
    with serving(app, llm) as poster:
        f = slack.add_file("train.log", crash_log())
        poster.event({"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "91.1",
                      "text": "<@UBOT> why?", "files": [f]})
        answer = _answer_msg(slack, "C1", "91.1")  # the deterministic answer stands
        time.sleep(1.0)
    assert "rank_crashed" in block_text(answer["blocks"])
    assert len([m for m in slack.thread("C1", "91.1")]) == 1  # no error reply after it
