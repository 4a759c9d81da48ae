"""`/nccl hang` for someone who reads Chinese (issue 25, one language): the node's own notes
(its English wire format) are posted in Chinese, through the real app over HTTP."""

from __future__ import annotations

from typing import Any

from bot.render.lang import latin_prose
from bot.slack.message import message_text
from tests.slack.conftest import ONCALL, block_text, click, hang_answer, serving
from tests.slack.fake_slack import FakeSlack

#: what a node's collector writes (tools/hang/procs.py, collect.py, ras.py, nvml.py)
NOTES = ("pid 1: not a rank of a distributed job (no RANK and LOCAL_RANK in its environment), "
         "or gone; skipped",)
RAS = ("NCCL RAS: NCCL RAS not listening on localhost:28028; RAS needs NCCL >= 2.24 and "
       "NCCL_RAS_ENABLE not 0, and listens where NCCL_RAS_ADDR says (localhost:28028 by "
       "default, on a node running the job)")


def test_a_chinese_reader_gets_the_node_s_notes_in_chinese(slack: FakeSlack,
                                                          make_app: Any) -> None:
    def tweak(deps: Any) -> None:  # the agent's answer, as it comes over HTTP
        deps.run_node = lambda node, tool, params, who: hang_answer(NOTES, RAS)

    app, deps = make_app(http=True, tweak=tweak)
    with serving(app, deps.settings) as poster:
        assert poster.command("lang zh", user=ONCALL)[0] == 200
        assert poster.command("hang gpu-node07", user=ONCALL)[0] == 200
        posted = slack.wait_for(lambda: next(
            (m for m in slack.messages.values() if "load_shard" in block_text(m.get("blocks"))),
            None), timeout=120)
    shown = message_text(posted["blocks"])
    assert "pid 1：不是分布式作业的 rank" in shown, shown
    assert "gpu-node07：NCCL RAS：localhost:28028 上没有 NCCL RAS 在监听" in shown, shown
    assert not latin_prose(shown), latin_prose(shown)


def test_why_is_it_stuck_in_a_chinese_thread_answers_in_chinese(slack: FakeSlack,
                                                                make_app: Any) -> None:
    """No language chosen by anyone: the thread's Chinese question makes the hang button's
    answer Chinese, the node's notes included (before, it was English)."""
    from bot.slack.blocks import ACTION_PROBE
    from bot.slack.payloads import RunButton

    def tweak(deps: Any) -> None:
        deps.run_node = lambda node, tool, params, who: hang_answer(NOTES, RAS)

    app, deps = make_app(http=True, tweak=tweak)
    with serving(app, deps.settings) as poster:
        poster.event({"type": "app_mention", "user": ONCALL, "channel": "C1", "ts": "70.1",
                      "text": "<@UBOT> 训练卡住不动了，所有 rank 都在等，怎么回事？"})
        first = slack.wait_for(lambda: next(  # the answer (with its buttons): remembered
            (m for m in slack.thread("C1", "70.1")
             if "ncclbot_actions:" in block_text(m.get("blocks"))), None), timeout=120)
        button = RunButton(nodes=["gpu-node07"], tool="hang").encode()
        assert poster.action(click(ACTION_PROBE, button, ONCALL,
                                   {**first, "channel": "C1", "thread_ts": "70.1"}))[0] == 200
        posted = slack.wait_for(lambda: next(
            (m for m in slack.messages.values() if "load_shard" in block_text(m.get("blocks"))),
            None), timeout=120)
    shown = message_text(posted["blocks"])
    assert "pid 1：不是分布式作业的 rank" in shown, shown
    assert not latin_prose(shown), latin_prose(shown)
