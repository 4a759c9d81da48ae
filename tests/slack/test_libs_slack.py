"""`/nccl libs NODE`: the new node tool reaches Slack through its ToolSpec alone (command,
help, button), run on a real agent on loopback over a real rank process."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.slack.conftest import Poster, block_text, click
from tests.slack.fake_slack import FakeSlack
from tests.tools.test_libs import torch_rank_process


@pytest.fixture
def torch_rank() -> Iterator[int]:
    with torch_rank_process("libs-slack") as pid:
        yield pid


def test_help_lists_every_tool_and_preset() -> None:
    from bot.slack.blocks import HELP
    from bot.slack.message import slack_wording
    from tools.registry import TOOLS

    for name, spec in TOOLS.items():
        assert f"`/nccl {name} " in HELP
        assert all(p in HELP for p in spec.presets)  # allreduce too
    assert slack_wording("run `ncclbot node hang --node n1`") == "run `/nccl hang NODE`"
    assert slack_wording("run `ncclbot node libs`") == "run `/nccl libs NODE`"


def test_libs_command_and_button(slack: FakeSlack, probe_app: Poster, torch_rank: int) -> None:
    import torch

    status, _ = probe_app.command("libs gpu-node07", user="UBOB")
    assert status == 200
    result = slack.wait_for(lambda: next((m for m in slack.messages.values()
                                          if "*libs* on" in block_text(m.get("blocks"))),
                                         None), 60)
    shown = block_text(result["blocks"])
    assert "gpu-node07" in shown and f"torch {torch.__version__}" in shown, shown
    message = {"channel": "C1", "ts": "70.1", "thread_ts": "70.1"}
    value = json.dumps({"node": "gpu-node07", "tool": "libs", "preset": ""})
    assert probe_app.action(click("ncclbot_probe:0", value, "UBOB", message))[0] == 200
    slack.wait_for(lambda: next((m for m in slack.thread("C1", "70.1")
                                 if "*libs* on" in block_text(m.get("blocks"))), None), 60)
