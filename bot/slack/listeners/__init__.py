"""Bolt listeners: ack at once, then do the work in lazy listeners."""

from __future__ import annotations

from typing import Any

from bot.slack.conversation import Conversation
from bot.slack.deps import Deps
from bot.slack.diagnostics import Diagnostics
from bot.slack.listeners import actions, commands, mentions


def register(app: Any, deps: Deps) -> None:
    conv, diag = Conversation(deps), Diagnostics(deps)
    mentions.register(app, deps, conv)
    commands.register(app, deps, conv, diag)
    actions.register(app, deps, diag)
