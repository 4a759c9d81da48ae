"""Sizes as people write them (one formatter for the tools, the CLI and Slack)."""

from __future__ import annotations

GIB = 2**30


def format_size(n: float) -> str:
    """Bytes in binary units, three significant digits: 4194304 -> "4 MiB",
    4200000 -> "4.01 MiB", 1000 -> "1000 B"."""
    for unit, scale in (("TiB", 2**40), ("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
