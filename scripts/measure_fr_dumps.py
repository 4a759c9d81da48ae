"""Measure how long Flight Recorder dumps take to read through the sandbox, and what they cost.

A real dump is made by torch itself: one gloo rank runs N all_reduces from a call stack
DEPTH frames deep and writes `_dump_fr_trace()` (a full ring buffer is 20,000 entries; deeper
stacks make a bigger file). Then `read_dumps` reads it alone, and a batch of four copies in
one child; and the crafted corpus of the tests. Prints wall time, the bot process's RSS
growth and the children's peak RSS.

    python scripts/measure_fr_dumps.py [--depth 150] [--entries 20000]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo", rank=0, world_size=1, init_method="tcp://127.0.0.1:0")
x = torch.ones(4)
def a(i, depth):
    return a(i, depth - 1) if depth else b(i)
def b(i):
    dist.all_reduce(x if i % 3 else torch.ones(8, 2))
for i in range(int(os.environ["N"])):
    a(i, int(os.environ["DEPTH"]))
open(os.environ["OUT"], "wb").write(torch._C._distributed_c10d._dump_fr_trace())
"""


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=150)
    ap.add_argument("--entries", type=int, default=20_000)
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        return measure(args.measure.read_bytes())
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fr_trace_0"
        env = {**os.environ, "N": str(args.entries), "DEPTH": str(args.depth),
               "OUT": str(out), "TORCH_FR_BUFFER_SIZE": str(args.entries),
               "GLOO_SOCKET_IFNAME": "lo"}
        subprocess.run([sys.executable, "-c", JOB], env=env, check=True, timeout=900)
        print(f"real dump: {out.stat().st_size / 2**20:.1f} MiB, {args.entries} entries, "
              f"stacks {args.depth + 3} frames deep", flush=True)
        # a fresh process, so that the children measured are the sandbox's only
        subprocess.run([sys.executable, __file__, "--measure", str(out)], check=True)


def measure(data: bytes) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bot.logs.fr_sandbox import DumpInput, read_dumps
    from tests.logs.crafted_dumps import crafted

    runs = [("one real dump", [DumpInput("fr_trace_0", lambda: data)]),
            ("four real dumps, one child",
             [DumpInput(f"fr_trace_{r}", lambda: data) for r in range(4)]),
            (f"crafted corpus ({len(crafted())} files)",
             [DumpInput(n, lambda d=d: d) for n, d, _ in crafted()])]
    for what, inputs in runs:
        before = _rss_kib()
        cpu0 = _children_cpu()
        t0 = time.monotonic()
        got = read_dumps(inputs)
        took = time.monotonic() - t0
        used = sum(1 for g in got if not isinstance(g, Exception))
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"{what}: {took:.2f} s ({_children_cpu() - cpu0:.2f} s of the children's CPU), "
              f"{used}/{len(got)} read, bot RSS +"
              f"{(_rss_kib() - before) / 1024:.0f} MB, children's peak RSS so far "
              f"{child / 1024:.0f} MB")


if __name__ == "__main__":
    main()
