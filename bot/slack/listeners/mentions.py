"""Mentions, DMs and follow-ups (messages or files) in threads the bot already answered."""

from __future__ import annotations

from typing import Any

from bot.slack.conversation import Conversation
from bot.slack.deps import Deps

HANDLED_SUBTYPES = (None, "file_share", "thread_broadcast")


def ack_event(ack: Any) -> None:
    ack()


def register(app: Any, deps: Deps, conv: Conversation) -> None:
    def on_mention(event: dict[str, Any], client: Any) -> None:
        conv.handle(event, client)

    def on_message(event: dict[str, Any], client: Any, context: Any) -> None:
        if event.get("subtype") not in HANDLED_SUBTYPES or event.get("bot_id"):
            return
        bot_user = context.get("bot_user_id") if context else None
        if bot_user and f"<@{bot_user}>" in (event.get("text") or ""):
            return  # the app_mention listener answers it
        thread = event.get("thread_ts")
        known = bool(thread) and deps.store.has_thread(event["channel"], str(thread))
        if event.get("channel_type") == "im" or known:
            conv.handle(event, client)

    app.event("app_mention")(ack=ack_event, lazy=[on_mention])
    app.event("message")(ack=ack_event, lazy=[on_message])
