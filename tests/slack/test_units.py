"""Pure parts: rendering limits, language choice, rate limits, the feedback report command."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from bot.slack import blocks
from bot.slack.lang import choose
from bot.slack.ratelimit import Limits, RateLimiter
from bot.slack.store import Store


def test_language_choice() -> None:
    assert choose(None, None, "why does it hang?") == "both"
    assert choose(None, None, "为什么 allreduce 超时了？") == "zh"
    assert choose("en", "zh", "为什么超时") == "en"
    assert choose(None, "zh", "why") == "zh"


def test_rate_limits() -> None:
    now = [0.0]
    rl = RateLimiter(2, 10.0, clock=lambda: now[0])
    assert rl.hit("u") == 0 and rl.hit("u") == 0 and rl.hit("u") > 0
    now[0] = 11.0
    assert rl.hit("u") == 0
    lim = Limits(probes_per_user=(1, 60), probes_per_node=(5, 60))
    assert lim.probe("a", "n1") is None
    assert "too many" in (lim.probe("a", "n2") or "")
    assert lim.claim_node("n1") and not lim.claim_node("n1")
    lim.release_node("n1")
    assert lim.claim_node("n1")


def test_render_respects_slack_limits() -> None:
    answer = {"summary": "x" * 5000, "diagnosis": {"root_causes": [], "suspects": []},
              "remediation": {"en": [f"step {i}" for i in range(200)]}, "citations": [],
              "notes": [f"n{i}" for i in range(100)]}
    r = blocks.render_answer(answer, "both", "a1")
    assert r.truncated and len(r.blocks) <= 50
    assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in r.blocks)
    assert r.blocks[-1]["type"] == "actions"


def test_feedback_report_cli(tmp_path: Path, monkeypatch) -> None:
    from bot.cli.main import app

    monkeypatch.setenv("NCCLBOT_DATA_DIR", str(tmp_path))
    store = Store(tmp_path / "ncclbot.sqlite3")
    aid = store.save_answer("C", "1", {"diagnosis": {"root_causes": [
        {"category": "rank_crashed", "card": "host-oom"}]}})
    store.add_feedback(aid, "U1", True)
    store.add_feedback(aid, "U2", False, "wrong card")
    out = CliRunner().invoke(app, ["feedback", "report", "--reasons"])
    assert out.exit_code == 0, out.output
    assert "rank_crashed" in out.output and "host-oom" in out.output
    assert "50%" in out.output and "wrong card" in out.output
