"""Resolving a thread through the real Slack app (signed HTTP, the local Slack server): the
next run of the same novel failure is answered with that cause first and the thread's
permalink under "seen before", by this replica and by another on the same PostgreSQL;
only the asker and on-call may resolve or forget; a resolution cannot inject markup;
forgetting takes it out of the ranking at once."""

from __future__ import annotations

import itertools
import json
from contextlib import ExitStack
from typing import Any

from pydantic import SecretStr

from bot.config import Settings
from bot.slack.message import message_text
from tests.memory.conftest import family_log
from tests.slack.conftest import ONCALL, Poster, block_text, click, serving
from tests.slack.fake_slack import FakeSlack

_N = itertools.count(1)
FIX = "pinned shardstore>=2.5 in the training image (reads manifest v3)"


def _answer(slack: FakeSlack, channel: str, ts: str) -> dict[str, Any]:
    return slack.wait_for(lambda: next(
        (m for m in slack.thread(channel, ts) if "ncclbot_details" in block_text(
            m.get("blocks"))), None), timeout=120)


def _mention(poster: Poster, slack: FakeSlack, channel: str, ts: str, user: str,
             run: str, text: str = "our job died") -> dict[str, Any]:
    f = slack.add_file(f"{run}.log", family_log(run))
    status, _ = poster.event({"type": "app_mention", "user": user, "channel": channel,
                              "ts": ts, "text": f"<@UBOT> {text}", "files": [f]})
    assert status == 200
    return _answer(slack, channel, ts)


def _buttons(message: dict[str, Any]) -> dict[str, str]:
    return {e["action_id"]: e["value"] for b in message["blocks"] if b["type"] == "actions"
            for e in b["elements"]}


def _submit(poster: Poster, view: dict[str, Any], user: str, cause: str, fix: str,
            title: str = "", category: str | None = None, link: str | None = None
            ) -> tuple[int, str]:
    values: dict[str, Any] = {
        "cause": {"value": {"type": "static_select", "selected_option": {"value": cause}}},
        "title": {"value": {"type": "plain_text_input", "value": title or None}},
        "category": {"value": {"type": "static_select", "selected_option":
                               {"value": category} if category else None}},
        "fix": {"value": {"type": "plain_text_input", "value": fix}},
        "link": {"value": {"type": "url_text_input", "value": link}}}
    payload = {"type": "view_submission", "team": {"id": "T1"}, "user": {"id": user},
               "api_app_id": "A1", "trigger_id": f"sub{next(_N)}",
               "view": {**view, "id": f"V{next(_N)}", "state": {"values": values}}}
    return poster.action(payload)


def _open_form(poster: Poster, slack: FakeSlack, answer: dict[str, Any], user: str
               ) -> dict[str, Any]:
    before = len(slack.of("views.open"))
    poster.action(click("ncclbot_resolve", _buttons(answer)["ncclbot_resolve"], user, answer))
    slack.wait_for(lambda: len(slack.of("views.open")) > before)
    view: dict[str, Any] = slack.of("views.open")[-1].params["view"]
    return view


def _resolve(poster: Poster, slack: FakeSlack, answer: dict[str, Any], user: str,
             fix: str = FIX) -> dict[str, Any]:
    view = _open_form(poster, slack, answer, user)
    status, _ = _submit(poster, view, user, "new", fix, title="shardstore reader older "
                        "than the shard writer", category="version_incompatibility",
                        link="https://git.example.com/infra/images/pull/812")
    assert status == 200
    return slack.wait_for(lambda: next(
        (m for m in slack.thread(answer["channel"], answer["thread_ts"])
         if "resolved this thread" in block_text(m.get("blocks"))), None))


def test_resolve_then_the_next_run_names_that_cause_first(
        slack: FakeSlack, settings: Settings, make_app: Any) -> None:
    app, deps = make_app(settings, http=True)
    with serving(app, settings) as poster:
        first = _mention(poster, slack, "C1", "1000.0001", "UALICE", "w2-r1-s2")
        assert "Resolved" in block_text(first["blocks"])
        assert "`version_incompatibility`" not in message_text(first["blocks"])

        # a bystander may not resolve it (told so, audited, no form)
        poster.action(click("ncclbot_resolve", _buttons(first)["ncclbot_resolve"], "UEVE",
                            first))
        told = slack.wait_call("chat.postEphemeral", lambda p: p.get("user") == "UEVE")
        assert "Only <@UALICE>" in told["text"] and not slack.of("views.open")
        assert ("UEVE", "resolve-refused") in {(u, a) for u, a, _, _ in
                                               deps.memory.audit_rows()}

        # the form offers the answer's candidates first, then cards, categories, new
        view = _open_form(poster, slack, first, "UALICE")
        groups = view["blocks"][0]["element"]["option_groups"]
        assert groups[0]["label"]["text"] == "This answer's candidates"
        assert groups[-1]["options"][0]["value"] == "new"
        # something new without a title is refused beside the field
        status, body = _submit(poster, view, "UALICE", "new", FIX)
        assert status == 200 and json.loads(body)["response_action"] == "errors"
        assert "title" in json.loads(body)["errors"]

        done = _resolve(poster, slack, first, "UALICE")
        assert "<@UALICE> resolved this thread" in block_text(done["blocks"])

        # another run of the family (3 ranks, another rank, another step), another channel
        second = _mention(poster, slack, "C2", "2000.0001", "UBOB", "w3-r2-s4")
        shown = message_text(second["blocks"])
        assert "`version_incompatibility` ·" in shown  # the leading cause, in the footer
        assert "Seen in <#C1>" in shown and "(resolved by <@UALICE>)" in shown
        assert "<https://fake.slack/archives/C1/p10000001|thread>" in shown, shown
        stored = deps.store.answer(_buttons(second)["ncclbot_resolve"])
        assert stored is not None and stored.root_causes[0].category == "version_incompatibility"
        assert stored.similar_incidents[0].local
        assert stored.similar_incidents[0].source == "https://fake.slack/archives/C1/p10000001"

        # resolved once: Resolved again opens the same form filled in (a correction)
        again = _open_form(poster, slack, first, "UALICE")
        assert again["blocks"][3]["element"]["initial_value"] == FIX

        # forget it from Slack (the asker may; a bystander may not): out of the ranking now
        forget = _buttons(done)["ncclbot_resolve_forget"]
        poster.action(click("ncclbot_resolve_forget", forget, "UEVE", done))
        slack.wait_for(lambda: len([c for c in slack.of("chat.postEphemeral")
                                    if c.params.get("user") == "UEVE"]) == 2)
        assert deps.memory.get(forget) is not None
        poster.action(click("ncclbot_resolve_forget", forget, ONCALL, done))
        slack.wait_for(lambda: deps.memory.get(forget) is None)
        third = _mention(poster, slack, "C3", "3000.0001", "UBOB", "w4-r0-s1")
        assert "Seen in" not in message_text(third["blocks"])
        stored = deps.store.answer(_buttons(third)["ncclbot_resolve"])
        assert stored is not None and stored.root_causes[0].category != "version_incompatibility"
        actions = [a for _, a, _, _ in deps.memory.audit_rows()]
        assert actions.count("add") == 1 and "forget" in actions


def test_a_resolution_cannot_inject_markup(slack: FakeSlack, settings: Settings,
                                           make_app: Any) -> None:
    app, _ = make_app(settings, http=True)
    evil = ("<!channel> <@U0EVIL> <https://evil.example/x|click here> *bold* _it_ ~s~ "
            "`code` https://evil.example/y @here #general")
    with serving(app, settings) as poster:
        first = _mention(poster, slack, "C1", "1100.0001", "UALICE", "w2-r1-s2")
        _resolve(poster, slack, first, "UALICE", fix=evil)
        second = _mention(poster, slack, "C2", "2100.0001", "UBOB", "w3-r2-s4")
        shown = message_text(second["blocks"])
        assert "Seen in <#C1>" in shown
        for bad in ("<!channel>", "<@U0EVIL>", "<https://evil", "https://evil", "*bold*",
                    "_it_", "~s~", "`code`", "@here", "#general"):
            assert bad not in shown, bad


def test_the_other_replica_answers_the_same(slack: FakeSlack, settings: Settings,
                                            make_app: Any, postgres_url: str) -> None:
    shared = settings.model_copy(update={"database_url": SecretStr(postgres_url)})
    with ExitStack() as stack:
        replicas = []
        for _ in range(2):
            app, deps = make_app(shared, http=True)
            stack.callback(deps.store.close)
            replicas.append(stack.enter_context(serving(app, shared)))
        a, b = replicas
        first = _mention(a, slack, "C1", "1200.0001", "UALICE", "w2-r1-s2")
        _resolve(a, slack, first, "UALICE")
        second = _mention(b, slack, "C2", "2200.0001", "UBOB", "w3-r2-s4")
        shown = message_text(second["blocks"])
        assert "`version_incompatibility`" in shown
        assert "<https://fake.slack/archives/C1/p12000001|thread>" in shown


def test_a_chinese_thread_gets_a_chinese_resolve_form(slack: FakeSlack, settings: Settings,
                                                       make_app: Any) -> None:
    """Resolved in a thread asked in Chinese opens the form in Chinese (labels, groups,
    the cards' Chinese titles), and a refused submission's errors are Chinese."""
    app, _ = make_app(settings, http=True)
    with serving(app, settings) as poster:
        first = _mention(poster, slack, "C1", "1300.0001", "UALICE", "w2-r1-s2",
                         text="我们的训练任务挂了，帮忙看看")
        view = _open_form(poster, slack, first, "UALICE")
        assert view["title"]["text"] == "已解决"
        assert view["blocks"][0]["label"]["text"] == "原因是什么？"
        groups = [g["label"]["text"] for g in view["blocks"][0]["element"]["option_groups"]]
        assert groups[0] == "本次回答的候选原因" and groups[-1] == "新的原因"
        status, body = _submit(poster, view, "UALICE", "new", "")
        assert status == 200 and json.loads(body)["errors"]["title"] == "新的原因需要一个简短的标题。"
