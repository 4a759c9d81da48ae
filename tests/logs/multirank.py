"""Generators of multi-rank logs for tests and benchmarks (launcher-prefixed, interleaved)."""

from __future__ import annotations

import random
from collections.abc import Iterator


def watchdog_line(rank: int, seq: int, op: str = "ALLREDUCE", numel: int = 262144) -> str:
    return (f"[rank{rank}]:[E1120 03:59:{rank % 60:02d}.{rank:06d} {4000 + rank} ProcessGroupNCCL.cpp:616] "
            f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            f"OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for 600"
            f"{rank % 100:03d} milliseconds before timing out.")


def training_lines(ranks: int, steps: int, seed: int = 0) -> Iterator[str]:
    rng = random.Random(seed)
    for step in range(steps):
        for _ in range(ranks):
            r = rng.randrange(ranks)
            yield (f"[rank{r}]:[2025-11-20 03:{(step // 60) % 60:02d}:{step % 60:02d},{r % 1000:03d}] "
                   f"INFO train.py:412 step {step} loss {2.0 + rng.random():.4f} lr 3e-4 tokens/s 48211")


def job_with_culprit(ranks: int = 64, culprit: int = 13, kind: str = "oom", steps: int = 20) -> str:
    """A job where `culprit` fails (oom | lag | mismatch | silent) and the others time out."""
    lines = list(training_lines(ranks, steps))
    for r in range(ranks):
        if r == culprit:
            if kind == "oom":
                lines.append(f"[rank{r}]:[2025-11-20 03:50:00,000] ERROR step failed")
                lines.append(f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
            elif kind == "lag":
                lines.append(watchdog_line(r, 4710))
            elif kind == "mismatch":
                lines.append(watchdog_line(r, 4711, op="ALLGATHER", numel=1024))
            continue
        lines.append(watchdog_line(r, 4711))
    return "\n".join(lines) + "\n"
