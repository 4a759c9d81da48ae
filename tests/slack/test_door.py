"""Issue 31 part 6 on Slack's HTTP door: idle sockets and slow request heads do not starve
signed Slack requests, idle sockets are closed, and refusals are summarised in the log."""

from __future__ import annotations

import json
import logging
import time
import urllib.parse

import pytest

from tests.agent.flood import closed_by_peer, fd_limit, headers_only_flood, idle_sockets
from tests.slack.conftest import Poster

IDLE = 300  # over the 256 that used to lock every request out with a 503
SLOW = 33


def test_idle_sockets_and_slow_heads_do_not_starve_slack(http_app: Poster,
                                                         caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    if fd_limit() < IDLE + SLOW + 400:
        pytest.skip(f"ulimit -n is {fd_limit()}; this test holds {IDLE} idle sockets")
    caplog.set_level(logging.WARNING, logger="bot.slack.serve")
    port = int(urllib.parse.urlsplit(http_app.url).port or 0)
    with idle_sockets(port, IDLE) as idle, \
            headers_only_flood(port, SLOW, 15.0, path="/slack/events", max_rounds=20) as slow:
        assert len(idle) == IDLE
        time.sleep(1)
        answers = [http_app.command("help") for _ in range(3)]
        closed = closed_by_peer(idle, wait=40)
    assert all(status == 200 and "/nccl probe NODE" in body for status, body in answers)
    assert closed == IDLE
    assert slow.statuses.get("408", 0) >= SLOW

    def summaries() -> list[dict]:
        return [json.loads(r.getMessage().split("slack door: ", 1)[1])
                for r in caplog.records if "slack door: " in r.getMessage()]

    deadline = time.monotonic() + 40
    while not any(s.get("event") == "refusal_summary" for s in summaries()) and \
            time.monotonic() < deadline:
        time.sleep(0.5)
    summary = next(s for s in summaries() if s.get("event") == "refusal_summary")
    assert summary["remote"] == "127.0.0.1" and summary["refused"] > 5
    # a bounded number of log lines for hundreds of refusals
    assert len(summaries()) < slow.opened + IDLE
