"""Health checks tied to the real state, the warm-up gate and the event-id record."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bot.slack.serve import Health, http_server, warm_up
from tests.slack.conftest import Poster, crash_log
from tests.slack.fake_slack import FakeSlack


def get(url: str) -> tuple[int, dict[str, Any] | str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read().decode(), exc.code
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


@contextmanager
def running(app: Any, health: Health) -> Iterator[str]:
    server = http_server(app, "127.0.0.1", 0, health=health)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


def test_http_health_follows_warm_up_and_the_store(slack: FakeSlack, make_app: Any,
                                                   settings: Any) -> None:
    app, deps = make_app(http=True)
    health = Health(store_ping=deps.store.ping)
    with running(app, health) as base:
        assert get(f"{base}/livez")[0] == 200
        status, state = get(f"{base}/healthz")
        assert status == 503 and state == {"ready": False, "store": True}
        # events wait for the warm-up (Slack retries them), and are not recorded as seen
        poster = Poster(f"{base}/slack/events")
        f = slack.add_file("a.log", crash_log())
        event = {"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "1.5",
                 "text": "<@UBOT> why?", "files": [f]}
        assert poster.event(event, event_id="EvWARM")[0] == 503
        warm_up(health, lambda: None)
        assert get(f"{base}/healthz") == (200, {"ready": True, "store": True})
        assert poster.event(event, event_id="EvWARM", retry=1)[0] == 200
        slack.wait_for(lambda: any("ncclbot_feedback_up" in json.dumps(m.get("blocks"))
                                   for m in slack.thread("C1", "1.5")))
        deps.store.close()  # the state database is gone: not healthy any more
        assert get(f"{base}/healthz")[0] == 503


def test_failed_warm_up_is_reported_not_fatal() -> None:
    health = Health()

    def broken() -> None:
        raise RuntimeError("index is corrupt")

    warm_up(health, broken)
    ok, state = health.status()
    assert ok and state["warm_error"] == "RuntimeError: index is corrupt"


def test_socket_mode_health_is_the_connection(make_app: Any) -> None:
    from bot.slack.serve import socket_handler

    app, deps = make_app()
    handler = socket_handler(app, "xapp-1-test")  # never connected here
    health = Health(store_ping=deps.store.ping, connected=handler.client.is_connected,
                    ready=True)
    with running(None, health) as base:
        status, state = get(f"{base}/healthz")
        assert status == 503 and state["socket_connected"] is False
        assert get(f"{base}/slack/events")[0] == 404
        health.connected = lambda: True
        assert get(f"{base}/healthz") == (200, {"ready": True, "store": True,
                                               "socket_connected": True})
    handler.close()


def test_event_ids_are_claimed_once(tmp_path) -> None:
    from bot.slack.store import EVENT_TTL_S, Store

    store = Store(tmp_path / "s.sqlite3")
    assert store.claim_event("Ev1", now=1000.0) and not store.claim_event("Ev1", now=1001.0)
    again = Store(tmp_path / "s.sqlite3")  # a restart remembers
    assert not again.claim_event("Ev1", now=1002.0)
    assert again.claim_event("Ev2", now=1000.0 + EVENT_TTL_S + 1)  # prunes Ev1 (first claim)
    assert again.claim_event("Ev1", now=1000.0 + EVENT_TTL_S + 2)
