"""nccl-tests' bandwidth formulas (NVIDIA/nccl-tests, doc/PERFORMANCE.md).

`nbytes` follows nccl-tests' "size" column: the per-rank buffer for all_reduce,
broadcast and sendrecv; the total (all ranks') buffer for all_gather,
reduce_scatter and alltoall. algbw = nbytes / time; busbw = algbw * factor.
"""

from __future__ import annotations

from typing import Literal

COLLECTIVES: tuple[Literal["all_reduce", "all_gather", "reduce_scatter", "broadcast",
                           "alltoall", "sendrecv"], ...] = (
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv")


def bus_factor(collective: str, nranks: int) -> float:
    """The busbw correction factor for `collective` over `nranks` ranks."""
    n = max(nranks, 1)
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if collective in ("broadcast", "sendrecv", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")


def bandwidths(collective: str, nbytes: int, time_us: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes per second), as nccl-tests prints them."""
    if time_us <= 0:
        return 0.0, 0.0
    algbw = nbytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * bus_factor(collective, nranks)


def sweep_sizes(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """Sizes from min to max multiplying by factor (max always included)."""
    if min_bytes <= 0 or max_bytes < min_bytes or factor <= 1:
        raise ValueError("need 0 < min_bytes <= max_bytes and factor > 1")
    sizes, s = [], float(min_bytes)
    while s < max_bytes:
        sizes.append(int(s))
        s *= factor
    sizes.append(max_bytes)
    return sorted(set(sizes))
