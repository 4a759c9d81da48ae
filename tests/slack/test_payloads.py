"""Slack's payloads read once into typed models, and ncclbot's own button values (pure)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from bot.slack.blocks import button, context, wire
from bot.slack.payloads import (
    BlockAction,
    DecideButton,
    FormMeta,
    LangButton,
    MessageEvent,
    RunButton,
    SlashCommand,
    on_action,
)
from bot.slack.resolve import NEW, read_submission
from tests.slack.conftest import click


def test_a_click_is_read_into_who_where_which_message_and_which_button() -> None:
    message = {"channel": "C1", "ts": "96.2", "thread_ts": "96.1", "text": "answer",
               "blocks": [{"type": "section", "block_id": "x",
                           "text": {"type": "mrkdwn", "text": "hi", "verbatim": False}},
                          {"type": "actions", "elements": [button("Details", "d", "a1")]}]}
    body = {**click("ncclbot_details", "0123456789abcdef", "UALICE", message),
            "response_url": "https://hooks.slack.com/x", "is_enterprise_install": False}
    got = BlockAction.read(body, "button click")
    assert got is not None
    assert (got.user_id, got.channel_id, got.thread_ts) == ("UALICE", "C1", "96.1")
    assert (got.action.action_id, got.value) == ("ncclbot_details", "0123456789abcdef")
    # the message's blocks go back to Slack as they came, keys ncclbot does not name too
    assert got.message is not None
    assert wire(got.message.blocks) == message["blocks"]
    # a message that starts its own thread; the channel only in the container
    body = click("ncclbot_details", "v", "UBOB", {"channel": "C2", "ts": "5.5"})
    del body["channel"]
    got = BlockAction.read(body, "button click")
    assert got is not None and (got.channel_id, got.thread_ts) == ("C2", "5.5")


def test_a_payload_without_what_ncclbot_needs_is_logged_in_one_line_and_dropped(
        caplog: pytest.LogCaptureFixture) -> None:
    seen: list[BlockAction] = []
    listener = on_action(lambda c, client, respond: seen.append(c))
    body = click("ncclbot_details", "v", "UALICE", {"channel": "C1", "ts": "1.1"})
    with caplog.at_level(logging.WARNING, logger="bot.slack.payloads"):
        listener(body={k: v for k, v in body.items() if k != "user"}, client=None)
        listener(body={**body, "message": {"ts": ["not", "a", "ts"]}}, client=None)
    assert seen == []
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("\n" not in line for line in lines), lines
    assert "at user" in lines[0] and "at message.ts" in lines[1]
    listener(body=body, client=None)
    assert [c.user_id for c in seen] == ["UALICE"]


def test_button_values_round_trip_and_values_ncclbot_did_not_make_are_refused() -> None:
    probe = RunButton(node="gpu-node07", tool="probe", preset="gloo", a="0123456789abcdef")
    assert json.loads(probe.encode()) == {"node": "gpu-node07", "tool": "probe",
                                          "preset": "gloo", "a": "0123456789abcdef"}
    assert RunButton.decode(probe.encode()) == probe
    hang = RunButton.decode(RunButton(nodes=["n1", "n2"], tool="hang").encode())
    assert hang is not None and hang.targets() == ["n1", "n2"]
    assert RunButton.decode('{"node": "n3", "tool": "hang"}').targets() == ["n3"]  # type: ignore[union-attr]
    assert RunButton.decode('{"node": 7, "preset": ""}') == RunButton(node="7", preset="")
    for foreign in ("", "{not json", '["a", 1]', '{"tool": "probe"}', '{"tool": "hang"}',
                    '{"node": ["a"]}', '{"nodes": "n1", "tool": "hang"}'):
        assert RunButton.decode(foreign) is None, foreign
    lang = LangButton.decode(LangButton(a="x", lang="zh").encode())
    assert lang is not None and lang.language == "zh"
    assert LangButton.decode('{"a": "x", "lang": "fr"}').language == "en"  # type: ignore[union-attr]
    assert LangButton.decode('{"lang": "zh"}') is None
    decide = DecideButton(a="0123456789abcdef", q="fewer_gpus", v="yes")
    assert DecideButton.decode(decide.encode()) == decide
    assert DecideButton.decode('{"a": "x", "q": "y"}') is None
    assert FormMeta.decode(FormMeta(a="a", c="C1", t="1.1").encode()) == FormMeta(
        a="a", c="C1", t="1.1")


def test_a_message_event_reads_null_text_and_its_files() -> None:
    event = MessageEvent.read({
        "type": "message", "subtype": "file_share", "channel": "C1", "user": "U1",
        "ts": "1.1", "text": None, "blocks": [], "files": [
            {"id": "F1", "name": "train.log", "size": 120, "mimetype": "text/plain",
             "url_private_download": "https://files.slack.com/F1/train.log", "extra": 1},
            {"id": "F2", "title": "untitled"}]}, "message event")
    assert event is not None and event.text == "" and event.subtype == "file_share"
    assert [(f.label, f.url, f.size) for f in event.files] == [
        ("train.log", "https://files.slack.com/F1/train.log", 120), ("untitled", "", None)]
    assert MessageEvent.read({"type": "app_mention", "text": "hi"}, "message event") is None
    assert SlashCommand.read({"text": "help", "user_id": "U1"}, "slash command") is None


def _view(meta: str, **values: dict[str, object]) -> dict[str, object]:
    return {"callback_id": "ncclbot_resolve_form", "private_metadata": meta,
            "state": {"values": {k: {"value": v} for k, v in values.items()}}}


def test_the_resolve_form_is_read_from_its_typed_state_and_checked() -> None:
    from bot.slack.payloads import SubmittedView

    meta = FormMeta(a="0123456789abcdef", c="C1", t="1.1").encode()
    view = SubmittedView.model_validate(_view(
        meta, cause={"type": "static_select", "selected_option": {"value": NEW}},
        title={"type": "plain_text_input", "value": "  NIC flapped "},
        fix={"type": "plain_text_input", "value": "replaced the cable"},
        link={"type": "url_text_input", "value": None}))
    sub, errors = read_submission(view)
    assert errors == {} and sub is not None
    assert (sub.answer_id, sub.channel, sub.thread_ts, sub.value, sub.title, sub.fix,
            sub.link) == ("0123456789abcdef", "C1", "1.1", NEW, "NIC flapped",
                          "replaced the cable", None)
    # metadata that is not ncclbot's, an empty form, a submission that could not be read
    sub, errors = read_submission(SubmittedView.model_validate(_view(
        '{"a": 1}', fix={"type": "plain_text_input", "value": "x"})))
    assert sub is None and "malformed" in errors["fix"] and errors["cause"] == "Pick the cause."
    sub, errors = read_submission(None)
    assert sub is None and set(errors) == {"fix", "cause"}


def test_blocks_leave_as_the_dicts_they_are() -> None:
    blocks = [context("a note"), {"type": "actions", "elements": [button("x", "y", "z")]}]
    assert wire(blocks) == [{"type": "context", "elements": [{"type": "mrkdwn",
                                                              "text": "a note"}]},
                            {"type": "actions", "elements": [{
                                "type": "button", "action_id": "y", "value": "z",
                                "text": {"type": "plain_text", "text": "x", "emoji": True}}]}]


def test_a_chinese_threads_resolve_form_and_its_errors_are_chinese() -> None:
    """The Resolved form of a Chinese thread: its labels, groups and the cards' and
    categories' names in Chinese, no English prose outside identifiers; the language rides
    in the form's metadata, so the errors Slack shows beside the fields are Chinese too;
    an English thread's form and errors stay English."""
    from bot.render.lang import latin_prose
    from bot.slack.listeners.resolve import _cards, _categories
    from bot.slack.payloads import SubmittedView
    from bot.slack.resolve import cause_choices, resolve_modal

    def texts(view: Any) -> list[str]:
        found: list[str] = []

        def walk(x: object, key: str = "") -> None:
            if isinstance(x, dict):
                for k, v in x.items():
                    walk(v, k)
            elif isinstance(x, list):
                for v in x:
                    walk(v, key)
            elif isinstance(x, str) and key == "text":
                found.append(x)
        walk(view)
        return found

    cards, categories = _cards("zh"), _categories("zh")
    groups = cause_choices(None, cards, categories, lang="zh")
    zh: Any = resolve_modal("0123456789abcdef", "C1", "1.1", groups, categories, lang="zh")
    shown = texts(zh)
    assert "原因是什么？" in shown and "已解决" in shown and "是什么解决了它？" in shown
    # the form's own words and the group labels: Chinese, no English prose
    groups_shown = [g["label"]["text"] for g in
                    zh["blocks"][0]["element"]["option_groups"]]
    assert groups_shown == ["知识卡片", "原因类别", "新的原因"]
    own = [b["label"]["text"] for b in zh["blocks"] if "label" in b]
    own += [zh["title"]["text"], zh["submit"]["text"], *groups_shown]
    leaks = [(t, [x.text for x in latin_prose(t)]) for t in own if latin_prose(t)]
    assert len(own) == 10 and not leaks, leaks[:5]
    # the cards' options are their Chinese titles (cut by words, never inside a code span)
    options = {o["value"]: o["text"]["text"]
               for o in zh["blocks"][0]["element"]["option_groups"][0]["options"]}
    for cid, cat, title in cards:
        label = options[f"card:{cid}"]
        assert label == f"{title} ({cat})" or title.startswith(label.rstrip("…").rstrip())
        assert label.count("`") % 2 == 0, label
    en: Any = resolve_modal("0123456789abcdef", "C1", "1.1",
                       cause_choices(None, _cards(), _categories()), _categories())
    assert "What was the cause?" in texts(en)

    for meta, want in ((zh["private_metadata"], "请用一两句话说明是什么解决了它。"),
                       (en["private_metadata"], "Say in a line or two what fixed it.")):
        view = SubmittedView.model_validate(_view(
            str(meta), cause={"type": "static_select", "selected_option": {"value": NEW}},
            fix={"type": "plain_text_input", "value": None}))
        sub, errors = read_submission(view)
        assert sub is None and errors["fix"] == want
        assert errors["title"] in ("新的原因需要一个简短的标题。",
                                   "Something new needs a short title.")
