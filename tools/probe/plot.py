"""busbw vs message size as a PNG (matplotlib, Agg backend, imported lazily)."""

from __future__ import annotations

from typing import Any


def plot_busbw(rows: list[dict[str, Any]], path: str, title: str = "") -> str | None:
    """Write the chart; returns an error message instead of raising."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"matplotlib is not installed: {exc}"
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        for coll in dict.fromkeys(r["collective"] for r in rows):
            pts = sorted((r["bytes"], r["busbw_gbps"]) for r in rows if r["collective"] == coll)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=coll)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(title[:90], fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
    except (OSError, ValueError) as exc:
        return f"could not write {path}: {exc}"
    finally:
        plt.close(fig)
    return None
