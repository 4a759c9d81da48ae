"""Everything the listeners need, built once per app (the one injection point for tests)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.slack.authz import OncallAuthz
from bot.slack.nodes import NodeRunner, ProbeStatus
from bot.slack.ratelimit import Limits
from bot.slack.store import Store
from bot.troubleshooter import Troubleshooter


@dataclass
class Deps:
    settings: Settings
    store: Store
    authz: OncallAuthz
    limits: Limits
    troubleshooter: Troubleshooter
    run_node: NodeRunner
    files_dir: Path
    bot_token: str
    #: how far a running probe has got (None: show elapsed time only)
    probe_status: ProbeStatus | None = None
    #: seconds between status-message updates while a diagnostic runs
    progress_every_s: float = 5.0

    def lang_prefs(self, user: str, channel: str) -> tuple[str | None, str | None]:
        return self.store.lang(f"user:{user}"), self.store.lang(f"channel:{channel}")


def ephemeral(client: Any, channel: str, user: str, text: str, respond: Any = None,
              thread_ts: str | None = None) -> None:
    """An ephemeral note to one user; via response_url when the bot is not in the channel."""
    try:
        client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)
    except Exception:
        if respond is None:
            raise
        respond(text=text, response_type="ephemeral")
