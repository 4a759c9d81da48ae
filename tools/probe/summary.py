"""A probe's result in words: the verdict line and a compact table (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tools.units import format_size


def probe_summary(rows: Sequence[dict[str, Any]]) -> tuple[str, list[str]]:
    """A probe's verdict line and a compact table (per collective: smallest, middle and
    largest size and the peak busbw; wrong results flagged)."""
    if not rows:
        return "no measurements came back", []
    wrong = [r for r in rows if r.get("correct") is False]
    peaks: dict[str, dict[str, Any]] = {}
    for r in rows:
        c = str(r.get("collective"))
        if c not in peaks or float(r.get("busbw_gbps") or 0) > float(peaks[c].get("busbw_gbps")
                                                                      or 0):
            peaks[c] = r
    slowest = min(peaks.values(), key=lambda r: float(r.get("busbw_gbps") or 0))
    best = max(peaks.values(), key=lambda r: float(r.get("busbw_gbps") or 0))
    verdict = (f"peak busbw {float(best['busbw_gbps']):.3g} GB/s ({best['collective']} at "
               f"{format_size(int(best['bytes']))})")
    if len(peaks) > 1:
        verdict += (f"; slowest collective {slowest['collective']} peaks at "
                    f"{float(slowest['busbw_gbps']):.3g} GB/s")
    if wrong:
        verdict = (f"WRONG RESULTS in {len(wrong)} measurement(s) "
                   f"({wrong[0]['collective']} at {format_size(int(wrong[0]['bytes']))}); "
                   + verdict)
    table = [f"{'collective':<15}{'size':>10}{'busbw GB/s':>12}{'time us':>11}  ok"]
    for c in peaks:
        mine = sorted((r for r in rows if r.get("collective") == c), key=lambda r: r["bytes"])
        picks = list(dict.fromkeys([0, len(mine) // 2, len(mine) - 1]))
        for i in picks:
            r = mine[i]
            table.append(f"{c:<15}{format_size(int(r['bytes'])):>10}"
                         f"{float(r.get('busbw_gbps') or 0):>12.3g}"
                         f"{float(r.get('time_us') or 0):>11.0f}  "
                         f"{'yes' if r.get('correct', True) else 'NO'}")
    return verdict, table[:16]
