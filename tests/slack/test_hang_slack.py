"""`/nccl hang NODES` from Slack: refused and audited for people not on call; for on-call
people the real agent samples a real hung job and the verdict is posted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.slack.message import message_text
from tests.hang.jobs import hung_job, need_py_spy
from tests.slack.conftest import ONCALL, Poster, block_text, hang_answer, serving
from tests.slack.fake_slack import FakeSlack


def test_hang_is_refused_for_people_not_on_call(slack: FakeSlack, probe_app: Poster,
                                                agent: tuple[str, Path]) -> None:
    from bot.slack.store import Store

    status, body = probe_app.command("hang gpu-node07", user="UALICE")
    assert status == 200 and "hang" in body
    rows = slack.wait_for(lambda: Store(
        probe_app.settings.state_db).audit_rows() or None)  # type: ignore[attr-defined]
    assert [(r["user"], r["tool"], r["outcome"]) for r in rows] == [("UALICE", "hang",
                                                                      "refused")]
    assert not agent[1].exists() or "/v1/hang" not in agent[1].read_text()  # nothing ran
    refusal = slack.wait_for(lambda: next((c for c in slack.of("chat.postEphemeral")
                                           if "may run diagnostics" in str(c.params)), None))
    assert refusal.params["user"] == "UALICE"


def test_hang_posts_the_verdict_for_on_call_people(slack: FakeSlack, probe_app: Poster,
                                                   agent: tuple[str, Path],
                                                   tmp_path: Path) -> None:
    from bot.slack.store import Store

    need_py_spy()
    with hung_job(tmp_path, stuck_rank=1):
        status, _ = probe_app.command("hang gpu-node07", user="UBOB")
        assert status == 200
        verdict = slack.wait_for(lambda: next(
            (m for m in slack.messages.values() if "load_shard" in block_text(m.get("blocks"))),
            None))  # the default, generous wait: sampling takes long on a busy machine
    shown = message_text(verdict["blocks"])
    assert "rank 1" in shown and "load_shard" in shown
    assert "Why is it stuck?" not in shown
    rows = Store(probe_app.settings.state_db).audit_rows()  # type: ignore[attr-defined]
    assert [(r["tool"], r["outcome"]) for r in rows] == [("hang", "started"),
                                                          ("hang", "success")]
    records = [json.loads(x) for x in agent[1].read_text().splitlines()]
    assert any(r.get("path") == "/v1/hang" and r.get("user") == "slack:UBOB" for r in records)


@pytest.mark.parametrize("fault", [None, "a fault in the triangulation"])
def test_the_audit_says_how_the_hang_answer_ended(slack: FakeSlack, make_app: Any,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  fault: str | None) -> None:
    """The samples came back; the answer was posted (success) or failed (a fault put into
    the real triangulation): the audit records that outcome, not "success" for both."""
    from bot.slack.store import Store

    if fault is not None:
        def broken(*args: Any, **kw: Any) -> Any:
            raise RuntimeError(fault)

        monkeypatch.setattr("bot.diagnosis.hang.triangulate", broken)

    def tweak(deps: Any) -> None:  # the agent's answer, as it comes over HTTP
        deps.run_node = lambda node, tool, params, who: hang_answer()

    app, deps = make_app(http=True, tweak=tweak)
    with serving(app, deps.settings) as poster:
        assert poster.command("hang gpu-node07", user=ONCALL)[0] == 200
        want = fault or "load_shard"
        slack.wait_for(lambda: any(want in block_text(m.get("blocks"))
                                   for m in slack.messages.values()), timeout=120)
    rows = Store(deps.settings.state_db).audit_rows()
    assert [(r["user"], r["tool"], r["outcome"]) for r in rows] == [
        (ONCALL, "hang", "started"), (ONCALL, "hang", "error" if fault else "success")]
    if fault is not None:
        assert fault in rows[-1]["detail"] and "could not answer" in rows[-1]["detail"]
    else:
        assert rows[-1]["detail"] == ""
