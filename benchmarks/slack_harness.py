"""The real Slack app behind its HTTP server, against a local Slack Web API (tests/slack's
FakeSlack), for the Slack benchmarks: post signed mentions, time their first answers."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config import load_settings  # noqa: E402
from bot.slack.app import build_deps, create_app, shutdown, web_client  # noqa: E402
from bot.slack.deps import Deps  # noqa: E402
from bot.slack.serve import http_server  # noqa: E402
from tests.slack.conftest import SECRET, Poster  # noqa: E402
from tests.slack.fake_slack import BOT_TOKEN, FakeSlack  # noqa: E402


@dataclass
class Bot:
    """A running app: `mention` posts a signed app_mention, `first_answers` waits for the
    answers (the status message replaced by an answer with buttons)."""

    slack: FakeSlack
    poster: Poster
    deps: Deps
    warm_s: float
    sent: dict[str, float] = field(default_factory=dict)

    def mention(self, ts: str, user: str, text: str, files: list[dict[str, Any]]) -> int:
        self.sent[ts] = time.monotonic()
        status, _ = self.poster.event({"type": "app_mention", "user": user, "channel": "C1",
                                       "ts": ts, "text": text, "files": files})
        return int(status)

    def first_answers(self, threads: list[str], timeout: float) -> dict[str, float]:
        """Seconds from each thread's mention to its first answer (missing: none in time)."""
        return self._times(threads, timeout, lambda blocks: "ncclbot_details" in blocks)

    def finished(self, threads: list[str], timeout: float) -> dict[str, float]:
        """Seconds from each thread's mention to its final message (any message the status
        gave way to: an answer, or a note that nothing was accepted)."""
        return self._times(threads, timeout, lambda blocks: ":hourglass" not in blocks)

    def _times(self, threads: list[str], timeout: float, final: Callable[[str], bool]
               ) -> dict[str, float]:
        """When each thread's status message was first updated to blocks `final` accepts."""
        done: dict[str, float] = {}
        deadline = time.monotonic() + timeout
        while len(done) < len(threads) and time.monotonic() < deadline:
            for c in self.slack.of("chat.update"):
                thread = self.slack.messages.get(("C1", c.params["ts"]), {}).get("thread_ts")
                if (thread in threads and thread not in done
                        and final(json.dumps(c.params.get("blocks")))):
                    done[thread] = c.t - self.sent[thread]
            time.sleep(0.1)
        return done

    def thread_text(self, ts: str) -> str:
        return json.dumps(self.slack.thread("C1", ts), ensure_ascii=False)


@contextmanager
def running_bot(**settings: Any) -> Iterator[Bot]:
    """A fresh app (own data dir, state and caches) on 127.0.0.1, warmed up first as
    `ncclbot serve slack` does; stopped on exit (queued work dropped, running work
    finished first)."""
    with FakeSlack() as slack, tempfile.TemporaryDirectory() as tmp:
        s = load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SECRET,
                          slack_api_url=slack.api_url, data_dir=Path(tmp), **settings)
        client = web_client(s)
        deps = build_deps(s, client)
        app = create_app(s, client, http=True, deps=deps)
        warm_s = deps.troubleshooter.warm()
        server = http_server(app, "127.0.0.1", 0)
        try:
            yield Bot(slack, Poster(f"http://127.0.0.1:{server.port}/slack/events"), deps,
                      warm_s)
        finally:
            server.stop()
            shutdown(app)


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile (nearest rank) of `values`; nan when empty."""
    lat = sorted(values)
    return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
