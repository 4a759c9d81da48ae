"""Buttons on an answer: details, the other language, other causes, run a probe, feedback
(with an optional reason; the buttons then say it was noted)."""

from __future__ import annotations

import logging
import re

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.answering.contract import Answer
from bot.slack import blocks, message
from bot.slack.deps import Deps, ephemeral
from bot.slack.diagnostics import Diagnostics
from bot.slack.lang import choose
from bot.slack.payloads import (
    BlockAction,
    FormMeta,
    LangButton,
    Payload,
    RunButton,
    ViewSubmission,
    on_action,
)
from tools.redact import redact_text

log = logging.getLogger(__name__)
#: What an answer id looks like (`Store.save_answer`: 16 hex digits).
ANSWER_ID = re.compile(r"[0-9a-f]{16}")


def register(app: App, deps: Deps, diag: Diagnostics) -> None:
    def ack_only(ack: Ack) -> None:
        ack()

    def probe(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        user, channel, thread_ts = click.user_id, click.channel_id, click.thread_ts
        v = RunButton.decode(click.value)
        if v is None:
            malformed(client, user, channel, "?", click.action.value, respond)
        elif v.tool == "hang":  # "Why is it stuck?": every node the answer names, answered
            # in the thread's language (a Chinese thread's hang answer is Chinese)
            asked = " ".join(deps.store.context(channel, thread_ts).questions[-1:]
                             if thread_ts else [])
            diag.hang(client, user, channel, thread_ts, v.targets(), respond,
                      lang=choose(*deps.lang_prefs(user, channel), asked))
        else:
            diag.run(client, user, channel, thread_ts, v.node or "", v.tool, v.preset,
                     respond)

    def malformed(client: WebClient, user: str, channel: str, button: str, value: str | None,
                  respond: Respond | None = None) -> None:
        """A button whose value no answer of ours could have made: audited (the value
        shortened, its secrets stripped) and the person told."""
        shown = redact_text(str(value)[:200])
        deps.store.audit(user, channel, "?", button, None, "invalid",
                         f"malformed button: {shown}")
        ephemeral(client, channel, user, "That button is malformed; ask again.", respond)

    def stored(answer_id: str, client: WebClient, click: BlockAction, button: str = ""
               ) -> Answer | None:
        """The answer a button belongs to; the person is told when it is gone (a value
        that is no answer id at all is audited as malformed)."""
        if not ANSWER_ID.fullmatch(answer_id):
            malformed(client, click.user_id, click.channel_id, button, answer_id)
            return None
        answer = deps.store.answer(answer_id)
        if answer is None:
            ephemeral(client, click.channel_id, click.user_id,
                      "I no longer have that answer; ask again.")
        return answer

    def thread_lang(user: str, channel: str, thread_ts: str | None, answer: Answer) -> str:
        """The thread's language: the person's or channel's choice, else the language of
        the thread's question (a Chinese thread gets Chinese replies)."""
        asked = answer.question or ""
        if not asked and thread_ts:
            asked = " ".join(deps.store.context(channel, thread_ts).questions[-1:])
        return choose(*deps.lang_prefs(user, channel), asked)

    def post(client: WebClient, channel: str, thread_ts: str | None,
             r: blocks.Rendered) -> None:
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=r.text,
                                blocks=blocks.wire(r.blocks))

    def other(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        user, channel, thread_ts = click.user_id, click.channel_id, click.thread_ts
        answer = stored(click.value, client, click, "other_causes")
        if answer is None:
            return
        lang = thread_lang(user, channel, thread_ts, answer)
        earlier = deps.store.context(channel, thread_ts).candidates if thread_ts else []
        post(client, channel, thread_ts, blocks.render_other_causes(answer, lang, earlier))

    def details(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        user, channel, thread_ts = click.user_id, click.channel_id, click.thread_ts
        answer = stored(click.value, client, click, "details")
        if answer is None:
            return
        r = message.details_message(answer, thread_lang(user, channel, thread_ts, answer))
        post(client, channel, thread_ts, r)
        if r.truncated:  # the whole answer as a file beside the shortened details
            try:
                client.files_upload_v2(channel=channel, thread_ts=thread_ts,
                                       content=blocks.full_report(answer),
                                       filename="ncclbot-report.md", title="ncclbot full report")
            except Exception:  # noqa: BLE001 - the shortened details are already there
                pass

    def other_language(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        v = LangButton.decode(click.value)
        if v is None:
            malformed(client, click.user_id, click.channel_id, "other_language",
                      click.action.value)
            return
        answer = stored(v.a, client, click, "other_language")
        if answer is None:
            return
        post(client, click.channel_id, click.thread_ts,
             message.other_language_message(answer, v.language))

    def noted(click: BlockAction, client: WebClient, text: str) -> None:
        """The answer's feedback buttons give way to a line saying who found it (un)helpful."""
        msg = click.message
        if msg is None or not msg.ts:
            return
        kept: list[blocks.Block] = []
        for b in msg.blocks:
            if b.get("type") == "actions":
                b = {**b, "elements": [e for e in b.get("elements", []) if e.get("action_id")
                                       not in (blocks.ACTION_UP, blocks.ACTION_DOWN)]}
                if not b["elements"]:
                    continue
            kept.append(b)
        kept.append(blocks.context(text))
        try:
            client.chat_update(channel=click.channel_id, ts=msg.ts, blocks=blocks.wire(kept),
                               text=msg.text or "ncclbot answer")
        except Exception:  # noqa: BLE001 - cosmetic: the feedback is stored
            pass

    def helpful(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        deps.store.add_feedback(click.value, click.user_id, True)
        noted(click, client, f"👍 <@{click.user_id}> found this helpful. Thanks!")

    def not_helpful(click: BlockAction, client: WebClient, respond: Respond | None) -> None:
        user = click.user_id
        deps.store.add_feedback(click.value, user, False)
        noted(click, client, f"👎 <@{user}> found this not helpful. Thanks, it is noted.")
        client.views_open(trigger_id=click.trigger_id, view=blocks.wire_view(
            blocks.reason_modal(click.value, click.channel_id, click.thread_ts or "")))

    def reason(ack: Ack, body: Payload) -> None:
        ack()
        sub = ViewSubmission.read(body, "feedback form")
        if sub is None:
            return
        meta = FormMeta.decode(sub.view.private_metadata)
        if meta is None:
            log.warning("ignored a feedback form whose metadata is not ncclbot's")
            return
        deps.store.add_feedback(meta.a, sub.user.id, False, sub.view.input("reason", "text").value)

    app.action(re.compile(f"^{blocks.ACTION_PROBE}"))(ack=ack_only, lazy=[on_action(probe)])
    app.action(blocks.ACTION_OTHER)(ack=ack_only, lazy=[on_action(other)])
    app.action(message.ACTION_DETAILS)(ack=ack_only, lazy=[on_action(details)])
    app.action(message.ACTION_LANG)(ack=ack_only, lazy=[on_action(other_language)])
    app.action(blocks.ACTION_UP)(on_action(helpful, ack_first=True))
    app.action(blocks.ACTION_DOWN)(on_action(not_helpful, ack_first=True))
    app.view(blocks.VIEW_REASON)(reason)
