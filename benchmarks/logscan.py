"""Log-scan speed and memory: `ncclbot analyze` against `grep -c -E` on the same file.

Generates the log of a 1024-rank job (interleaved, launcher-prefixed training output,
NCCL INFO init lines, then a CUDA OOM on one culprit rank and watchdog timeouts on the
other 1023), runs the analyzer and a grep with a comparable keyword set over it, and
prints MB/s, peak RSS and the ratio of wall times (and of CPU times, which other load on the
machine hardly moves). Targets: analyzer <= 2x grep's time,
peak RSS < 256 MB at 1 GB, culprit found.

A second, channel-heavy log (`--channel-heavy-mb`, default 100) has the same culprit but a
body of NCCL INFO channel lines, as jobs that keep creating communicators (RL weight sync,
per-layer groups) write with NCCL_DEBUG=INFO: every line is a match, the worst case for
a scanner that hands matches on one by one.

    python benchmarks/logscan.py                # 100 MB and 1 GB, plus 100 MB channel-heavy
    python benchmarks/logscan.py --sizes 100 --channel-heavy-mb 0    # just 100 MB
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANKS = 1024
CULPRIT = 663
GREP_KEYWORDS = (
    "Watchdog caught|WorkNCCL|NCCL WARN|NCCL INFO (NCCL version|NET/|Bootstrap|comm 0x)|"
    "[Ee]rror|Exception|Traceback|SIG[A-Z]+|Xid|exitcode|Killed|out of memory|timed out|"
    "Timed out|Connection refused|Address already in use|clients joined|/dev/shm"
)


def host(rank: int) -> str:
    return f"gpu-node-{rank // 8:03d}"


def channel_line(rng: random.Random, step: int) -> str:
    r = rng.randrange(RANKS)
    h, pid, d = host(r), 20000 + r, r % 8
    via = "P2P/CUMEM/read" if step % 4 else "NET/IB/0/GDRDMA"
    return (f"[rank{r}]:{h}:{pid}:{pid + 80} [{d}] NCCL INFO Channel {step % 32:02d}/32 : "
            f"{r}[{d}] -> {(r + 1) % RANKS}[{(d + 1) % 8}] via {via}")


def training_line(rng: random.Random, r: int, step: int) -> str:
    return (f"[rank{r}]:[2025-11-20 0{3 + step // 3600 % 6}:{step // 60 % 60:02d}:"
            f"{step % 60:02d},{r % 1000:03d}] INFO trainer.py:412 step {step} loss "
            f"{2.0 + rng.random():.4f} lr 3.0e-04 grad_norm {rng.random():.3f} tokens/s "
            f"{40000 + rng.randrange(9000)}")


def generate(path: Path, size_mb: int, seed: int = 7, channels: bool = False) -> None:
    """Write a log of about size_mb MB with one culprit rank (body: training lines, or
    NCCL channel lines with `channels`)."""
    rng = random.Random(seed)
    target = size_mb * 2**20
    with path.open("w", encoding="utf-8") as out:
        init = []
        for r in range(RANKS):
            h, pid, d = host(r), 20000 + r, r % 8
            init.append(f"[rank{r}]:{h}:{pid}:{pid} [{d}] NCCL INFO Bootstrap : Using eth0:10.0.{r // 8 // 256}.{r // 8 % 256}<0>")
            init.append(f"[rank{r}]:{h}:{pid}:{pid + 80} [{d}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0")
            for c in range(4):
                init.append(f"[rank{r}]:{h}:{pid}:{pid + 80} [{d}] NCCL INFO Channel {c:02d}/32 : {r}[{d}] -> {(r + 1) % RANKS}[{(d + 1) % 8}] via P2P/CUMEM/read")
            init.append(f"[rank{r}]:{h}:{pid}:{pid + 80} [{d}] NCCL INFO comm 0x7f2a{r:04x} rank {r} nranks {RANKS} cudaDev {d} nvmlDev {d} busId {d + 1}8000 commId 0xabc - Init COMPLETE")
        init.insert(0, f"[rank0]:{host(0)}:20000:20000 [0] NCCL INFO NCCL version 2.21.5+cuda12.4")
        out.write("\n".join(init) + "\n")
        written = out.tell()
        step = 0
        tail_budget = 2 * 2**20
        while written < target - tail_budget:
            batch = []
            for _ in range(RANKS):
                r = rng.randrange(RANKS)
                if r == CULPRIT and step > 5:
                    continue
                batch.append(channel_line(rng, step) if channels else training_line(rng, r, step))
            out.write("\n".join(batch) + "\n")
            written = out.tell()
            step += 1
        tail = [
            f"[rank{CULPRIT}]:[2025-11-20 03:00:06,001] ERROR trainer.py:418 step 6 failed",
            f"[rank{CULPRIT}]: Traceback (most recent call last):",
            f'[rank{CULPRIT}]:   File "/workspace/train.py", line 588, in main',
            f"[rank{CULPRIT}]:     loss = model(batch).loss",
            f"[rank{CULPRIT}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. "
            "GPU 7 has a total capacity of 79.15 GiB of which 1.10 GiB is free.",
        ]
        for r in range(RANKS):
            if r == CULPRIT:
                continue
            tail.append(
                f"[rank{r}]:[E1120 03:59:{r % 60:02d}.{r:06d} {20000 + r} ProcessGroupNCCL.cpp:616] [Rank {r}] "
                f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=90211, OpType=ALLREDUCE, "
                f"NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600{r % 100:03d} milliseconds "
                "before timing out."
            )
        out.write("\n".join(tail) + "\n")


def run_measured(cmd: list[str]) -> tuple[float, int, bytes, float]:
    """Wall time (s), peak RSS (bytes), stdout and CPU time (user + sys, s) of one child.

    CPU time is reported next to wall time because it hardly moves when other processes
    share the machine (wall time does)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read() if proc.stdout else b""
    _, _, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    return elapsed, usage.ru_maxrss * 1024, out, usage.ru_utime + usage.ru_stime


def bench(path: Path, repeats: int = 3) -> dict:
    size = path.stat().st_size
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    ncclbot = shutil.which("ncclbot") or str(Path(sys.executable).with_name("ncclbot"))
    runs_a = [run_measured([ncclbot, "analyze", str(path), "--json"]) for _ in range(repeats)]
    runs_g = [run_measured(["grep", "-c", "-E", GREP_KEYWORDS, str(path)]) for _ in range(repeats)]
    best_a, rss_a, out_a, _ = min(runs_a, key=lambda r: r[0])
    best_g, _rss_g, out_g, _ = min(runs_g, key=lambda r: r[0])
    cpu_a, cpu_g = min(r[3] for r in runs_a), min(r[3] for r in runs_g)
    answer = json.loads(out_a)
    suspects = answer["diagnosis"]["suspects"]
    top = answer["diagnosis"]["root_causes"][0]["category"] if answer["diagnosis"]["root_causes"] else None
    return {
        "size_mb": size / 2**20,
        "analyze_s": best_a,
        "analyze_mb_s": size / 2**20 / best_a,
        "analyze_rss_mb": rss_a / 2**20,
        "grep_s": best_g,
        "grep_mb_s": size / 2**20 / best_g,
        "grep_matches": int(out_g.strip() or 0),
        "ratio": best_a / best_g,
        "analyze_cpu_s": cpu_a,
        "grep_cpu_s": cpu_g,
        "cpu_ratio": cpu_a / cpu_g,
        "culprit_found": bool(suspects) and suspects[0]["rank"] == CULPRIT,
        "top_category": top,
        "engine": answer.get("input", {}).get("engine"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1024], help="sizes in MB")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the logs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--channel-heavy-mb", type=int, default=100,
                        help="size of the channel-heavy log (0: skip it)")
    args = parser.parse_args()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="ncclbot-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"{'size':>8} {'analyze s':>10} {'MB/s':>8} {'RSS MB':>8} {'grep s':>8} {'MB/s':>8} "
          f"{'ratio':>6} {'cpu ratio':>9}  culprit  top category  engine")
    try:
        runs = [(size, False) for size in args.sizes]
        if args.channel_heavy_mb > 0:
            runs.append((args.channel_heavy_mb, True))
        for size, channels in runs:
            path = workdir / f"job-{RANKS}ranks-{size}mb{'-channels' if channels else ''}.log"
            if not path.exists():
                generate(path, size, channels=channels)
            r = bench(path, args.repeats)
            print(f"{r['size_mb']:7.0f}M {r['analyze_s']:10.2f} {r['analyze_mb_s']:8.0f} "
                  f"{r['analyze_rss_mb']:8.1f} {r['grep_s']:8.2f} {r['grep_mb_s']:8.0f} "
                  f"{r['ratio']:6.2f} {r['cpu_ratio']:9.2f}  {'yes' if r['culprit_found'] else 'NO':7}  "
                  f"{r['top_category']}  {r['engine']}{'  (channel-heavy)' if channels else ''}")
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
