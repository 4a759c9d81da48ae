"""Socket Mode: the same listeners driven through the app's dispatch (no websocket)."""

from __future__ import annotations

import gzip
import itertools
import time
from typing import Any

from slack_bolt import App, BoltRequest

from tests.slack.conftest import block_text, crash_log
from tests.slack.fake_slack import FakeSlack

_IDS = itertools.count(1)


def dispatch(app: App, event: dict[str, Any], event_id: str | None = None,
             retry: int = 0) -> int:
    """Deliver an event as the Socket Mode adapter does (`retry_attempt`: a redelivery)."""
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1",
            "event_id": event_id or f"EvS{next(_IDS):06d}", "event": event,
            "retry_attempt": retry, "retry_reason": "timeout" if retry else ""}
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
    assert "rank_crashed" in text and "建议步骤" in text and "What to do" not in text  # zh

    # the same content again in the thread, under another name: not analyzed twice
    again = slack.add_file("copy.log.gz", gzip.compress(crash_log()))
    dispatch(app, dm("10.2", "", [again], thread_ts="10.1"))
    dup = final(slack, "D1", "10.1", "Already analyzed")
    assert "rank2.log.gz" in block_text(dup["blocks"])
    assert len([m for m in slack.thread("D1", "10.1") if "ncclbot_feedback_up" in
                block_text(m.get("blocks"))]) == 1

    # a follow-up question gets a short reply from the thread's answer
    dispatch(app, dm("10.3", "and what should I check first?", thread_ts="10.1"))
    slack.wait_for(lambda: [m for m in slack.thread("D1", "10.1") if "ncclbot_followup" in
                            block_text(m.get("blocks"))])


def test_a_question_without_a_log_is_answered_from_the_question(slack: FakeSlack,
                                                               app: App) -> None:
    from bot.slack.message import message_text

    dispatch(app, dm("12.1", "NCCL hangs at init inside docker, unhandled system error"))
    answer = final(slack, "D1", "12.1", "ncclbot_details")
    assert "`shm_ipc_container`" in message_text(answer["blocks"])


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
    time.sleep(1.0)
    assert slack.downloads == 1


def test_long_answer_is_short_first_and_its_details_come_with_the_full_report(
        slack: FakeSlack, make_app) -> None:
    from bot.slack.message import FIRST_MAX, message_text
    from tests.slack.conftest import click, script_answers

    long_answer = {"verdict": "diagnosed", "summary": "S", "probes": [],
                   "diagnosis": {"root_causes": [{"category": "rank_crashed", "card": "c",
                                                  "confidence": 0.9, "evidence": [],
                                                  "certainty": "likely"}],
                                 "suspects": []},
                   "remediation": {"en": ["step " + "x" * 500] * 40, "zh": ["步骤"] * 3},
                   "citations": []}
    app, _ = make_app(tweak=lambda deps: script_answers(deps, long_answer))
    dispatch(app, dm("40.1", "why"))
    msg = final(slack, "D1", "40.1", "ncclbot_details")
    assert len(message_text(msg["blocks"])) <= FIRST_MAX
    details_id = next(e["value"] for b in msg["blocks"] if b["type"] == "actions"
                      for e in b["elements"] if e["action_id"] == "ncclbot_details")
    app.dispatch(BoltRequest(body=click("ncclbot_details", details_id, "UALICE",
                                        {**msg, "thread_ts": "40.1"}), mode="socket_mode"))
    details = slack.wait_call("chat.postMessage", lambda p: "full report is attached" in
                              block_text(p.get("blocks")))
    assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in details["blocks"])
    assert len(details["blocks"]) <= 50
    done = slack.wait_call("files.completeUploadExternal")
    assert done.get("thread_ts") == "40.1"
    assert any(b"step xxx" in v for v in slack.uploads.values())


def test_redelivered_event_is_answered_once(slack: FakeSlack, app: App) -> None:
    f = slack.add_file("a.log", crash_log())
    event = dm("50.1", "why?", [f])
    assert dispatch(app, event, event_id="EvSAME") == 200
    assert dispatch(app, event, event_id="EvSAME", retry=1) == 200
    final(slack, "D1", "50.1", "ncclbot_feedback_up")
    time.sleep(1.0)
    assert len(slack.thread("D1", "50.1")) == 1 and slack.downloads == 1


def _counting(deps: Any) -> None:
    from tests.slack.conftest import CountingAnalyzer

    cache = deps.troubleshooter.analyses
    cache.analyze = CountingAnalyzer(cache.analyze)


def answers_in(slack: FakeSlack, channel: str, thread_ts: str) -> list[dict[str, Any]]:
    return [m for m in slack.thread(channel, thread_ts)
            if "ncclbot_feedback_up" in block_text(m.get("blocks"))]


def test_followup_reuses_the_thread_analysis(slack: FakeSlack, make_app) -> None:
    app, deps = make_app(tweak=_counting)
    f = slack.add_file("rank0.log", crash_log())
    dispatch(app, dm("60.1", "why did it hang?", [f]))
    final(slack, "D1", "60.1", "ncclbot_feedback_up")
    assert deps.troubleshooter.analyses.analyze.calls == 1
    dispatch(app, dm("60.2", "what should I check first?", thread_ts="60.1"))
    reply = final(slack, "D1", "60.1", "ncclbot_followup")
    assert deps.troubleshooter.analyses.analyze.calls == 1  # not analyzed again
    ctx = slack.wait_for(lambda: (c := deps.store.context("D1", "60.1")).questions[1:] and c)
    assert ctx.analysis_key and ctx.questions == ["why did it hang?",
                                                  "what should I check first?"]
    assert ctx.candidates[0].category == "rank_crashed"
    assert "ncclbot_details" in block_text(reply["blocks"])  # the report, on request
    # a new log is a new set of logs: analyzed once more, with the first
    g = slack.add_file("rank1.log", crash_log("gpu-node09"))
    dispatch(app, dm("60.3", "", [g], thread_ts="60.1"))
    slack.wait_for(lambda: len(answers_in(slack, "D1", "60.1")) == 2)
    assert deps.troubleshooter.analyses.analyze.calls == 2


def cause(category: str, card: str, confidence: float) -> dict[str, Any]:
    return {"category": category, "card": card, "confidence": confidence, "evidence": [],
            "title": {"en": f"title of {card}"}}


def scripted_answer(*causes: dict[str, Any]) -> dict[str, Any]:
    return {"verdict": "diagnosed", "summary": f"Most likely: {causes[0]['category']}",
            "diagnosis": {"root_causes": list(causes), "suspects": []},
            "remediation": {}, "citations": [], "probes": []}


def test_new_logs_keep_the_thread_candidates(slack: FakeSlack, make_app) -> None:
    from tests.slack.conftest import script_answers

    answers = (scripted_answer(cause("rank_crashed", "cuda-oom", 0.8)),
               scripted_answer(cause("timeout_too_short", "short-timeout", 0.6)))
    scripts = []
    app, deps = make_app(tweak=lambda d: (_counting(d),
                                          scripts.append(script_answers(d, *answers))))
    script = scripts[0]
    f = slack.add_file("rank0.log", crash_log())
    dispatch(app, dm("70.1", "why did it hang?", [f]))
    final(slack, "D1", "70.1", "ncclbot_feedback_up")
    # a log posted without a word answers the thread's last question, over both logs
    g = slack.add_file("rank1.log", crash_log("gpu-node09"))
    dispatch(app, dm("70.2", "", [g], thread_ts="70.1"))
    slack.wait_for(lambda: len(answers_in(slack, "D1", "70.1")) == 2)
    assert script.requests[1].text == "why did it hang?"
    assert len(script.requests[1].logs) == 2
    second = answers_in(slack, "D1", "70.1")[1]
    text = block_text(second["blocks"])
    # one cause in this answer, but the thread had another: it is offered and named
    assert "ncclbot_other_causes" in text
    assert "leading candidate was rank_crashed (80%" in text
    assert deps.troubleshooter.analyses.analyze.calls == 2

    from tests.slack.conftest import click

    actions = next(b for b in second["blocks"] if b["type"] == "actions")
    other_id = next(e["value"] for e in actions["elements"]
                    if e["action_id"] == "ncclbot_other_causes")
    body = click("ncclbot_other_causes", other_id, "UALICE",
                 {**second, "thread_ts": "70.1"})
    app.dispatch(BoltRequest(body=body, mode="socket_mode"))
    other = slack.wait_call("chat.postMessage", lambda p: p.get("text") == "Other possible "
                            "causes")
    assert "Also considered earlier in this thread" in block_text(other["blocks"])
    assert "title of cuda-oom" in block_text(other["blocks"])


def test_followup_questions_get_short_answers_to_what_was_asked(slack: FakeSlack,
                                                                 app: App) -> None:
    """The two follow-ups of issue 17, on the bundled OOM sample."""
    from bot.slack.message import FOLLOW_UP_MAX, message_text
    from tests.conftest import ROOT

    f = slack.add_file("train.log", (ROOT / "examples" / "sample-8rank-oom.log").read_bytes())
    dispatch(app, dm("80.1", "why did it crash?", [f]))
    final(slack, "D1", "80.1", "ncclbot_feedback_up")
    dispatch(app, dm("80.2", "Is it enough to set PYTORCH_CUDA_ALLOC_CONF="
                     "expandable_segments:True or do I need to lower the batch size?",
                     thread_ts="80.1"))
    en = final(slack, "D1", "80.1", "ncclbot_followup")
    text = message_text(en["blocks"])
    assert len(text) <= FOLLOW_UP_MAX + 200  # the reply, and the line naming its card
    assert "expandable_segments" in text and "batch size" in text
    dispatch(app, dm("80.3", "rank 5 为什么会比其他 rank 多用显存？", thread_ts="80.1"))
    zh = slack.wait_for(lambda: [m for m in slack.thread("D1", "80.1")
                                 if "ncclbot_followup" in block_text(m.get("blocks"))
                                 and "显存" in block_text(m.get("blocks"))])[0]
    text = message_text(zh["blocks"])
    assert "rank 5" in text and "显存" in text and len(text) <= FOLLOW_UP_MAX + 200


def test_zip_and_several_files_at_once(slack: FakeSlack, app: App, tmp_path) -> None:
    import zipfile

    archive = tmp_path / "logs.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("node07/rank0.log", crash_log())
        z.writestr("node07/rank1.log", b"gpu-node07: rank 1 waiting\n")
    f = slack.add_file("logs.zip", archive.read_bytes(), mimetype="application/zip",
                       filetype="zip")
    dispatch(app, dm("80.1", "why?", [f]))
    text = block_text(final(slack, "D1", "80.1", "ncclbot_feedback_up")["blocks"])
    assert "rank_crashed" in text and "logs.zip" in text

    a = slack.add_file("rank0.log", crash_log())
    b = slack.add_file("rank1.log.gz", gzip.compress(crash_log("gpu-node09")))
    c = slack.add_file("notes.png", b"\x89PNG", mimetype="image/png", filetype="png")
    dispatch(app, dm("81.1", "why?", [a, b, c]))
    text = block_text(final(slack, "D1", "81.1", "ncclbot_feedback_up")["blocks"])
    assert "Accepted: rank0.log" in text and "rank1.log.gz" in text
    assert "notes.png is not a log file" in text
    assert "rank_crashed" in text
    assert len(answers_in(slack, "D1", "81.1")) == 1  # one answer for the three files


def test_planted_secrets_never_reach_slack(slack: FakeSlack, make_app) -> None:
    """An answer that quotes 40+ secret shapes (evidence lines, notes, steps, explanation):
    the first message and its details hold none of them, whichever code quoted them (the
    Slack client itself strips them)."""
    import json as _json
    from pathlib import Path

    import yaml

    from tests.slack.conftest import click, script_answers

    planted = yaml.safe_load((Path(__file__).parent.parent / "fixtures" / "secrets" /
                              "planted.yaml").read_text(encoding="utf-8"))
    lines = [p["line"] for p in planted]
    answer = {"verdict": "diagnosed", "summary": lines[0], "explanation": " ".join(lines[:5]),
              "diagnosis": {"root_causes": [{
                  "category": "rank_crashed", "card": "c", "confidence": 0.8,
                  "certainty": "likely", "title": {"en": lines[1]},
                  "evidence": [{"file": "train.log", "line": i, "text": t}
                               for i, t in enumerate(lines, 1)]}],
                  "suspects": [{"rank": 0, "host": "gpu-node07", "reason": lines[2]}]},
              "remediation": {"en": lines}, "notes": lines, "citations": []}
    app, _ = make_app(tweak=lambda deps: script_answers(deps, answer))
    dispatch(app, dm("90.1", "why did it fail?"))
    first = final(slack, "D1", "90.1", "ncclbot_details")
    ids = {e["action_id"]: e["value"] for b in first["blocks"] if b["type"] == "actions"
           for e in b["elements"]}
    app.dispatch(BoltRequest(body=click("ncclbot_details", ids["ncclbot_details"], "UALICE",
                                        {**first, "thread_ts": "90.1"}), mode="socket_mode"))
    slack.wait_call("chat.postMessage", lambda p: str(p.get("text", "")).startswith("Details"))
    posted = _json.dumps([c.params for c in slack.calls], ensure_ascii=False)
    assert posted.count("[REDACTED]") >= 20  # the lines were posted, stripped
    assert [p["secret"] for p in planted if p["secret"] in posted] == []
