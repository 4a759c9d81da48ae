"""Bolt listeners: ack at once, then do the work in lazy listeners."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from slack_bolt import App, BoltRequest, BoltResponse

from bot.slack.conversation import Conversation
from bot.slack.deps import Deps
from bot.slack.diagnostics import Diagnostics
from bot.slack.listeners import actions, commands, deciding, mentions, resolve
from bot.slack.payloads import Envelope, Payload

log = logging.getLogger(__name__)


def once_key(body: Payload, request: BoltRequest) -> str | None:
    """What makes a request unique, so a repeat is recognised: the event id of an event, the
    trigger id of a slash command, button or dialog (a replay of a signed request carries the
    same one), else the signed request itself (signature and timestamp)."""
    env = Envelope.read(body, "request") or Envelope()
    if env.type == "event_callback":
        return f"event:{env.event_id}" if env.event_id else None
    if env.trigger_id:
        kind = "action" if env.type == "block_actions" else (
            "view" if env.type == "view_submission" else "command")
        first = env.actions[0].action_ts if env.actions else ""
        return f"{kind}:{env.trigger_id}:{first}"
    sig = (request.headers.get("x-slack-signature") or [""])[0]
    stamp = (request.headers.get("x-slack-request-timestamp") or [""])[0]
    return f"signed:{stamp}:{sig}" if sig else None


def skip_repeats(deps: Deps) -> Callable[..., BoltResponse | None]:
    """A global middleware: a request already received is acknowledged and dropped. Slack
    retries an event it thinks was not acknowledged (X-Slack-Retry-Num), Socket Mode may
    redeliver, and a captured signed request can be replayed within the signature's five
    minutes: none of them runs anything twice. The keys are kept in the state database, so
    this holds across restarts and replicas sharing it."""

    def middleware(body: Payload, request: BoltRequest, next_: Callable[[], None]
                   ) -> BoltResponse | None:
        key = once_key(body, request)
        if key and not deps.store.claim_event(key):
            retry_header: Sequence[str] = request.headers.get("x-slack-retry-num") or []
            retry = retry_header[0] if retry_header else body.get("retry_attempt")
            log.info("skipping %s: already received (retry %s)", key, retry)
            return BoltResponse(status=200, body="")
        next_()
        return None

    return middleware


def register(app: App, deps: Deps) -> None:
    conv, diag = Conversation(deps), Diagnostics(deps)
    app.middleware(skip_repeats(deps))
    mentions.register(app, deps, conv)
    commands.register(app, deps, conv, diag)
    actions.register(app, deps, diag)
    resolve.register(app, deps)
    deciding.register(app, deps, conv)
