"""The Slack fixtures (a local Slack, settings, apps over real HTTP) for the memory tests,
and the novel failure family's real logs (torchrun gloo runs of
benchmarks/shardstore_family, recorded)."""

from __future__ import annotations

from pathlib import Path

from tests.slack.conftest import (  # noqa: F401 - fixtures, registered by importing them
    make_app,
    settings,
    shared_data,
    slack,
    warm_retriever,
)

FAMILY = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "memory"


def family_log(name: str) -> bytes:
    """One recorded run: w2-r1-s2 (2 ranks, rank 1 fails at step 2), w3-r2-s4, w4-r0-s1."""
    return (FAMILY / f"shardstore-{name}.log").read_bytes()
