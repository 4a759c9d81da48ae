"""Mentions, DMs and follow-ups (messages or files) in threads the bot already answered."""

from __future__ import annotations

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient

from bot.slack.conversation import Conversation
from bot.slack.deps import Deps
from bot.slack.payloads import MessageEvent, on_event

HANDLED_SUBTYPES = (None, "file_share", "thread_broadcast")


def ack_event(ack: Ack) -> None:
    ack()


def register(app: App, deps: Deps, conv: Conversation) -> None:
    def on_mention(event: MessageEvent, client: WebClient, context: BoltContext) -> None:
        conv.handle(event, client)

    def on_message(event: MessageEvent, client: WebClient, context: BoltContext) -> None:
        if event.subtype not in HANDLED_SUBTYPES or event.bot_id:
            return
        bot_user = context.get("bot_user_id") if context else None
        if bot_user and f"<@{bot_user}>" in event.text:
            return  # the app_mention listener answers it
        thread = event.thread_ts
        known = bool(thread) and deps.store.has_thread(event.channel, str(thread))
        if event.channel_type == "im" or known:
            conv.handle(event, client)

    app.event("app_mention")(ack=ack_event, lazy=[on_event(on_mention)])
    app.event("message")(ack=ack_event, lazy=[on_event(on_message)])
