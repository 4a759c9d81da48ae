"""A hung LLM costs an answer at most the first-token timeout, in the CLI and in Slack (both
go through the Troubleshooter): then the deterministic answer with a note, and the
circuit breaker counts an outage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bot.answering.troubleshooter import Question, Troubleshooter
from bot.config import Settings
from tests.agent_llm.conftest import OOM_CARD, ROOT, grounded_final, settings_for

ANALYZE = {"tool_calls": [("analyze_log", {"attachment": "train.log"})]}


class Hung:
    """A scripted step that records when the request arrived, then answers only after
    `seconds` (the server stops sleeping when the test ends)."""

    def __init__(self, seconds: float = 300.0) -> None:
        self.seconds = seconds
        self.arrived: list[float] = []
        self.event = threading.Event()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.arrived.append(time.monotonic())
        self.event.set()
        return {"sleep": self.seconds, "content": "{}"}


def test_the_default_first_token_timeout_is_at_most_20_s() -> None:
    assert 0 < Settings().llm_first_token_s <= 20


def test_ask_answers_within_the_first_token_timeout(llm, crash_log: Path,
                                                    tmp_path: Path) -> None:
    """`ncclbot ask` as a process against an LLM that accepts the request and answers only
    after 300 s: the per-call timeout is 600 s, the first-token timeout 3 s; the deterministic
    answer comes within the latter (plus the fallback's own work), with the note."""
    hung = Hung()
    srv = llm(hung)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env.update(PYTHONPATH=str(ROOT), NCCLBOT_LLM_PROVIDER="openai",
               NCCLBOT_LLM_MODEL="scripted", NCCLBOT_LLM_BASE_URL=srv.base_url,
               NCCLBOT_LLM_API_KEY="test-key", NCCLBOT_LLM_TIMEOUT_S="600",
               NCCLBOT_LLM_FIRST_TOKEN_S="3")
    proc = subprocess.Popen([sys.executable, "-c", "from bot.cli.main import main; main()",
                             "ask", "why did it die?", "--log", str(crash_log), "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, err = proc.communicate(timeout=300)
    ended = time.monotonic()
    assert proc.returncode == 0, err[-2000:]
    assert hung.arrived, "the LLM was never asked"
    # without the first-token timeout the answer would wait for the model's 300 s; the
    # fallback's own work gets a generous 120 s (it took 41 s at load 20 under -n 2)
    assert ended - hung.arrived[0] < 3 + 120
    result = json.loads(out)
    assert not (result.get("llm") or {}).get("used")
    assert result["diagnosis"]["root_causes"][0]["card"] == OOM_CARD  # deterministic
    notes = [n for n in result["notes"] if n.startswith("LLM answer abandoned")]
    assert len(notes) == 1 and "within 3 s" in notes[0] and "Traceback" not in err


def test_slack_and_cli_share_the_bound_and_the_breaker(llm, crash_log: Path,
                                                       store: Any) -> None:
    """The Troubleshooter both doors use: a hung first request is abandoned after the
    first-token timeout and counts as an outage; an LLM that answers in time is used."""
    hung = Hung()
    srv = llm(hung)
    ts = Troubleshooter(settings_for(srv, llm_timeout_s=60, llm_first_token_s=1.5),
                        agent_store=store)
    t0 = time.monotonic()
    out = ts.answer(Question("why?", (str(crash_log),)))
    assert time.monotonic() - t0 < 60  # the per-call timeout never ran out
    assert (out.llm is None or not out.llm.used) and out.root_causes[0].card == OOM_CARD
    assert any(n.startswith("LLM answer abandoned") and "1.5 s" in n for n in out.notes)
    assert ts.breaker.failures == 1
    assert len(srv.requests) == 1  # abandoned: no further request
    # a live LLM within the bound is used, and resets the count
    live = llm(ANALYZE, grounded_final)
    ts2 = Troubleshooter(settings_for(live, llm_first_token_s=30), agent_store=store)
    answered = ts2.answer(Question("why?", (str(crash_log),)))
    assert answered.llm is not None and answered.llm.used
    assert ts2.breaker.failures == 0
