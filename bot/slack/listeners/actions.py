"""Buttons on an answer: run a probe, other causes, feedback (with an optional reason)."""

from __future__ import annotations

import json
import re
from typing import Any

from bot.slack import blocks
from bot.slack.deps import Deps, ephemeral
from bot.slack.diagnostics import Diagnostics
from bot.slack.lang import choose


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
            node, tool, preset = str(v["node"]), str(v.get("tool", "probe")), v.get("preset")
        except (ValueError, KeyError, TypeError):
            ephemeral(client, channel, user, "That button is malformed; ask again.", respond)
            return
        diag.run(client, user, channel, thread_ts, node, tool, preset, respond)

    def other(body: dict[str, Any], action: dict[str, Any], client: Any) -> None:
        user, channel, thread_ts = _where(body)
        answer = deps.store.answer(action.get("value", ""))
        if answer is None:
            ephemeral(client, channel, user, "I no longer have that answer; ask again.")
            return
        lang = choose(*deps.lang_prefs(user, channel), "")
        earlier = deps.store.context(channel, thread_ts).candidates if thread_ts else []
        r = blocks.render_other_causes(answer, lang, earlier)
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=r.text,
                                blocks=r.blocks)

    def helpful(ack: Any, body: dict[str, Any], action: dict[str, Any], client: Any) -> None:
        ack()
        user, channel, thread_ts = _where(body)
        deps.store.add_feedback(action.get("value", ""), user, True)
        ephemeral(client, channel, user, "Thanks, noted as helpful.", thread_ts=thread_ts)

    def not_helpful(ack: Any, body: dict[str, Any], action: dict[str, Any],
                    client: Any) -> None:
        ack()
        user, channel, thread_ts = _where(body)
        deps.store.add_feedback(action.get("value", ""), user, False)
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
    app.action(blocks.ACTION_UP)(helpful)
    app.action(blocks.ACTION_DOWN)(not_helpful)
    app.view(blocks.VIEW_REASON)(reason)
