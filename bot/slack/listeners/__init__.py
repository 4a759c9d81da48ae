"""Bolt listeners: ack at once, then do the work in lazy listeners."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from slack_bolt import BoltRequest, BoltResponse

from bot.slack.conversation import Conversation
from bot.slack.deps import Deps
from bot.slack.diagnostics import Diagnostics
from bot.slack.listeners import actions, commands, mentions

log = logging.getLogger(__name__)


def skip_repeats(deps: Deps) -> Callable[..., BoltResponse | None]:
    """A global middleware: an event already received (Slack retries one it thinks was not
    acknowledged, with X-Slack-Retry-Num, and Socket Mode may redeliver) is acknowledged
    and dropped. Event ids are kept in the state database, so this holds across restarts."""

    def middleware(body: dict[str, Any], request: BoltRequest, next_: Callable[[], None]
                   ) -> BoltResponse | None:
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if event_id and not deps.store.claim_event(str(event_id)):
            retry_header: Sequence[str] = request.headers.get("x-slack-retry-num") or []
            retry = retry_header[0] if retry_header else body.get("retry_attempt")
            log.info("skipping event %s: already received (retry %s)", event_id, retry)
            return BoltResponse(status=200, body="")
        next_()
        return None

    return middleware


def register(app: Any, deps: Deps) -> None:
    conv, diag = Conversation(deps), Diagnostics(deps)
    app.middleware(skip_repeats(deps))
    mentions.register(app, deps, conv)
    commands.register(app, deps, conv, diag)
    actions.register(app, deps, diag)
