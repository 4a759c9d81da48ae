"""The planted-secret corpus: no shape reaches a model request or a Slack message."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.agent.redact import Redactor
from bot.agent.redact_rules import strip_secrets

PLANTED = yaml.safe_load((Path(__file__).parent / "fixtures" / "secrets" / "planted.yaml")
                         .read_text(encoding="utf-8"))


def test_the_corpus_has_at_least_forty_shapes() -> None:
    assert len(PLANTED) >= 40
    assert len({p["secret"] for p in PLANTED}) == len(PLANTED)


@pytest.mark.parametrize("case", PLANTED, ids=[p["line"][:40] for p in PLANTED])
def test_no_planted_secret_survives(case: dict[str, str]) -> None:
    assert case["secret"] not in strip_secrets(case["line"])  # Slack's door
    assert case["secret"] not in Redactor(hosts=True).redact(case["line"])  # the model's


def test_everyday_log_lines_are_left_alone() -> None:
    for line in (
        "/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py",
        "NCCL_IB_HCA=mlx5_0,mlx5_1 NCCL_SOCKET_IFNAME=eth0 NCCL_IB_PKEY=0",
        "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4711, OpType=ALLREDUCE, NumelIn=262144, Timeout(ms)=600000)",
        "max_tokens=2048 num_tokens=512 tokenizer=Qwen/Qwen2-7B",
        "sha256:3f5a9c0d2e7b1a4c6d8e0f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c",
    ):
        assert strip_secrets(line) == line
