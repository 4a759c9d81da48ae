"""Everything the listeners need, built once per app (the one injection point for tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from slack_bolt import Respond
from slack_sdk import WebClient

from bot.answering.troubleshooter import Troubleshooter
from bot.config import Settings
from bot.memory.store import MemoryStore
from bot.slack.authz import OncallAuthz
from bot.slack.fair import FairScheduler
from bot.slack.nodes import NodeRunner, ProbeStatus
from bot.slack.ratelimit import Limits
from bot.slack.store import Store


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
    #: answers being worked on: fair across users (see `bot.slack.fair`)
    work: FairScheduler = field(default_factory=FairScheduler)
    #: the LLM's accounts that follow the deterministic answers (their own workers, so a
    #: slow LLM never holds up a first answer)
    llm_work: FairScheduler = field(default_factory=lambda: FairScheduler(name="ncclbot-llm"))
    #: the team's own resolved incidents (same database as `store`)
    memory: MemoryStore | None = None

    @classmethod
    def schedulers(cls, settings: Settings) -> tuple[FairScheduler, FairScheduler]:
        """`work` and `llm_work` as the settings size them."""
        per_user, queue = settings.slack_jobs_per_user, settings.slack_queue_per_user
        return (FairScheduler(settings.slack_workers, per_user, queue),
                FairScheduler(settings.slack_llm_workers, per_user, queue, name="ncclbot-llm"))

    def shutdown(self, wait: bool = True) -> None:
        """Stop the schedulers: waiting work is dropped, running work finishes."""
        self.work.shutdown(wait)
        self.llm_work.shutdown(wait)

    def lang_prefs(self, user: str, channel: str) -> tuple[str | None, str | None]:
        return self.store.lang(f"user:{user}"), self.store.lang(f"channel:{channel}")


def ephemeral(client: WebClient, channel: str, user: str, text: str,
              respond: Respond | None = None, thread_ts: str | None = None) -> None:
    """An ephemeral note to one user; via response_url when the bot is not in the channel."""
    try:
        client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)
    except Exception:
        if respond is None:
            raise
        respond(text=text, response_type="ephemeral")
