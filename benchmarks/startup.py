"""CLI start-up: wall time of `ncclbot --help` and of `ncclbot analyze` on the small sample.

Targets: `--help` under 0.5 s; `analyze` imports no torch, chromadb or langchain.
    python benchmarks/startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    exe = shutil.which("ncclbot") or str(Path(sys.executable).with_name("ncclbot"))
    for label, cmd in (
        ("ncclbot --help", [exe, "--help"]),
        ("ncclbot analyze sample", [exe, "analyze", "examples/sample-8rank-oom.log", "--json"]),
        ("python -c pass (reference)", [sys.executable, "-c", "pass"]),
    ):
        median, best = timed(cmd, args.repeats)
        print(f"{label:32} median {median * 1000:7.0f} ms   best {best * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
