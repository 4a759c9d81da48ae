"""Two bot replicas (HTTP mode, each its own server, listener pool and connection pool)
on one PostgreSQL: Slack delivers the same signed event, slash command and button click
to both, with retries, and every one of them is answered exactly once."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

from pydantic import SecretStr

from bot.config import Settings
from tests.slack.conftest import Poster, block_text, click, crash_log, serving, sign
from tests.slack.fake_slack import FakeSlack


def _answers(slack: FakeSlack, channel: str, ts: str) -> list[dict[str, Any]]:
    return [m for m in slack.thread(channel, ts) if "ncclbot_details" in block_text(
        m.get("blocks"))]


def _all_at_once(sends: list[Callable[[], tuple[int, str]]]) -> None:
    """Deliver concurrently, as Slack's retries and a load balancer would."""
    with ThreadPoolExecutor(len(sends)) as pool:
        statuses = [status for status, _ in pool.map(lambda send: send(), sends)]
    assert statuses == [200] * len(sends)


def test_two_replicas_on_one_postgres_answer_everything_once(
        slack: FakeSlack, settings: Settings, make_app: Any, postgres_url: str) -> None:
    shared = settings.model_copy(update={"database_url": SecretStr(postgres_url)})
    with ExitStack() as stack:
        replicas: list[Poster] = []
        for _ in range(2):
            app, deps = make_app(shared, http=True)
            stack.callback(deps.store.close)
            assert deps.store.path is None  # PostgreSQL, not a file
            replicas.append(stack.enter_context(serving(app, shared)))
        a, b = replicas

        # an event, delivered to both replicas and retried twice on each
        f = slack.add_file("train.log", crash_log())
        event = {"type": "app_mention", "user": "UALICE", "channel": "C1", "ts": "4.4",
                 "text": "<@UBOT> why?", "files": [f]}
        _all_at_once([lambda p=p, r=r: p.event(event, event_id="EvBOTH", retry=r)
                      for r in (None, 1, 2) for p in (a, b)])
        answer = slack.wait_for(lambda: next(iter(_answers(slack, "C1", "4.4")), None))

        # one slash command (one trigger id) to both, twice
        body = urllib.parse.urlencode({
            "command": "/nccl", "text": "ask what does NCCL_P2P_DISABLE do?",
            "user_id": "UALICE", "channel_id": "C2", "team_id": "T1",
            "response_url": "http://127.0.0.1:9/none", "trigger_id": "tBOTH"})
        _all_at_once([lambda p=p: p.post(body, "application/x-www-form-urlencoded",
                                         sign(body)) for p in (a, b, a, b)])

        # one button click to both, twice
        ids = {e["action_id"]: e["value"] for blk in answer["blocks"]
               if blk["type"] == "actions" for e in blk["elements"]}
        payload = click("ncclbot_other_causes", ids["ncclbot_feedback_up"], "UALICE", answer)
        _all_at_once([lambda p=p: p.action(payload) for p in (b, a, b, a)])
        slack.wait_call("chat.postMessage", lambda p: p.get("text") == "Other possible causes")
        asked = slack.wait_for(lambda: next((m for m in slack.messages.values()
                                             if "asked:" in (m.get("text") or "")), None))
        slack.wait_for(lambda: _answers(slack, "C2", asked["ts"]))
    # both servers stopped, every running listener finished: count what reached Slack
    thread = slack.thread("C1", "4.4")  # the answer, then the other causes on request
    assert len(_answers(slack, "C1", "4.4")) == 1 and len(thread) == 2
    reactions = [c.params["channel"] for c in slack.of("reactions.add")]
    assert slack.downloads == 1 and sorted(reactions) == ["C1", "C2"]
    posted = [c.params for c in slack.of("chat.postMessage")]
    assert sum("asked:" in (p.get("text") or "") for p in posted) == 1
    assert sum(p.get("text") == "Other possible causes" for p in posted) == 1
    assert len(_answers(slack, "C2", asked["ts"])) == 1
