"""Buttons on an answer: details, the other language, other causes, run a probe, feedback
(with an optional reason; the buttons then say it was noted)."""

from __future__ import annotations

import json
import re
from typing import Any

from bot.answering.contract import Answer, Lang
from bot.slack import blocks, message
from bot.slack.deps import Deps, ephemeral
from bot.slack.diagnostics import Diagnostics
from bot.slack.lang import choose
from tools.redact import redact_text

#: What an answer id looks like (`Store.save_answer`: 16 hex digits).
ANSWER_ID = re.compile(r"[0-9a-f]{16}")


def _where(body: dict[str, Any]) -> tuple[str, str, str | None]:
    msg = body.get("message") or {}
    channel = (body.get("channel") or {}).get("id") or body.get("container", {}).get(
        "channel_id", "")
    return body["user"]["id"], channel, msg.get("thread_ts") or msg.get("ts")


def register(app: Any, deps: Deps, diag: Diagnostics) -> None:
    def ack_only(ack: Any) -> None:
        ack()

    def probe(body: dict[str, Any], action: dict[str, Any], client: Any, respond: Any) -> None:
        user, channel, thread_ts = _where(body)
        try:
            v = json.loads(action.get("value") or "{}")
            if v.get("tool") == "hang":  # "Why is it stuck?": every node the answer names
                nodes = [str(n) for n in (v.get("nodes") or [v["node"]])][:64]
                diag.hang(client, user, channel, thread_ts, nodes, respond)
                return
            node, tool, preset = str(v["node"]), str(v.get("tool", "probe")), v.get("preset")
        except (ValueError, KeyError, TypeError, AttributeError):
            malformed(client, user, channel, "?", action, respond)
            return
        diag.run(client, user, channel, thread_ts, node, tool, preset, respond)

    def malformed(client: Any, user: str, channel: str, button: str, action: dict[str, Any],
                  respond: Any = None) -> None:
        """A button whose value no answer of ours could have made: audited (the value
        shortened, its secrets stripped) and the person told."""
        value = redact_text(str(action.get("value"))[:200])
        deps.store.audit(user, channel, "?", button, None, "invalid",
                         f"malformed button: {value}")
        ephemeral(client, channel, user, "That button is malformed; ask again.", respond)

    def stored(answer_id: str, client: Any, user: str, channel: str,
               action: dict[str, Any] | None = None, button: str = "") -> Answer | None:
        """The answer a button belongs to; the person is told when it is gone (a value
        that is no answer id at all is audited as malformed)."""
        if not ANSWER_ID.fullmatch(answer_id):
            malformed(client, user, channel, button, action or {"value": answer_id})
            return None
        answer = deps.store.answer(answer_id)
        if answer is None:
            ephemeral(client, channel, user, "I no longer have that answer; ask again.")
        return answer

    def thread_lang(user: str, channel: str, thread_ts: str | None, answer: Answer) -> str:
        """The thread's language: the person's or channel's choice, else the language of
        the thread's question (a Chinese thread gets Chinese replies)."""
        asked = answer.question or ""
        if not asked and thread_ts:
            asked = " ".join(deps.store.context(channel, thread_ts).questions[-1:])
        return choose(*deps.lang_prefs(user, channel), asked)

    def post(client: Any, channel: str, thread_ts: str | None, r: blocks.Rendered) -> None:
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=r.text,
                                blocks=r.blocks)

    def other(body: dict[str, Any], action: dict[str, Any], client: Any) -> None:
        user, channel, thread_ts = _where(body)
        answer = stored(str(action.get("value", "")), client, user, channel, action,
                        "other_causes")
        if answer is None:
            return
        lang = thread_lang(user, channel, thread_ts, answer)
        earlier = deps.store.context(channel, thread_ts).candidates if thread_ts else []
        post(client, channel, thread_ts, blocks.render_other_causes(answer, lang, earlier))

    def details(body: dict[str, Any], action: dict[str, Any], client: Any) -> None:
        user, channel, thread_ts = _where(body)
        answer = stored(str(action.get("value", "")), client, user, channel, action, "details")
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

    def other_language(body: dict[str, Any], action: dict[str, Any], client: Any) -> None:
        user, channel, thread_ts = _where(body)
        try:
            v = json.loads(action.get("value") or "{}")
            answer_id = str(v["a"])
            lang: Lang = "zh" if v.get("lang") == "zh" else "en"
        except (ValueError, KeyError, TypeError, AttributeError):
            malformed(client, user, channel, "other_language", action)
            return
        answer = stored(answer_id, client, user, channel, action, "other_language")
        if answer is None:
            return
        post(client, channel, thread_ts, message.other_language_message(answer, lang))

    def noted(body: dict[str, Any], client: Any, text: str) -> None:
        """The answer's feedback buttons give way to a line saying who found it (un)helpful."""
        msg = body.get("message") or {}
        if not msg.get("ts"):
            return
        kept = []
        for b in msg.get("blocks") or []:
            if b.get("type") == "actions":
                b = {**b, "elements": [e for e in b.get("elements", []) if e.get("action_id")
                                       not in (blocks.ACTION_UP, blocks.ACTION_DOWN)]}
                if not b["elements"]:
                    continue
            kept.append(b)
        kept.append(blocks.context(text))
        try:
            client.chat_update(channel=_where(body)[1], ts=msg["ts"], blocks=kept,
                               text=msg.get("text") or "ncclbot answer")
        except Exception:  # noqa: BLE001 - cosmetic: the feedback is stored
            pass

    def helpful(ack: Any, body: dict[str, Any], action: dict[str, Any], client: Any) -> None:
        ack()
        user = _where(body)[0]
        deps.store.add_feedback(action.get("value", ""), user, True)
        noted(body, client, f"👍 <@{user}> found this helpful. Thanks!")

    def not_helpful(ack: Any, body: dict[str, Any], action: dict[str, Any],
                    client: Any) -> None:
        ack()
        user, channel, thread_ts = _where(body)
        deps.store.add_feedback(action.get("value", ""), user, False)
        noted(body, client, f"👎 <@{user}> found this not helpful. Thanks, it is noted.")
        client.views_open(trigger_id=body["trigger_id"],
                          view=blocks.reason_modal(action.get("value", ""), channel,
                                                   thread_ts or ""))

    def reason(ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
        ack()
        meta = json.loads(view.get("private_metadata") or "{}")
        text = (((view.get("state") or {}).get("values") or {}).get("reason") or {}).get(
            "text", {}).get("value")
        deps.store.add_feedback(meta.get("a", ""), body["user"]["id"], False, text)

    app.action(re.compile(f"^{blocks.ACTION_PROBE}"))(ack=ack_only, lazy=[probe])
    app.action(blocks.ACTION_OTHER)(ack=ack_only, lazy=[other])
    app.action(message.ACTION_DETAILS)(ack=ack_only, lazy=[details])
    app.action(message.ACTION_LANG)(ack=ack_only, lazy=[other_language])
    app.action(blocks.ACTION_UP)(helpful)
    app.action(blocks.ACTION_DOWN)(not_helpful)
    app.view(blocks.VIEW_REASON)(reason)
