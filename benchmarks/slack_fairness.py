"""Fairness: one person uploads zip bombs (160 members x 64 MiB of log text each, ~10 GiB
expanded), ten other people ask about their own crash logs at the same time.

    .venv/bin/python benchmarks/slack_fairness.py [--bombs 4] [--others 10]
                                                  [--members 160] [--member-mb 64]

Runs the real app (signed HTTP events, a local Slack Web API) twice in one process: a
reference run with the ten questions alone, then the same questions sent while the bombs
are in flight. Prints p50/p95 of the others' time to first answer in both runs, their
ratio, and what became of each bomb (stopped with a note?). Target (issue 18): the others'
answers stay under 10 s. The bomb is built by hand from one compressed member repeated,
so the full 160 x 64 MiB one takes seconds to make.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

from slack_harness import Bot, percentile, running_bot

from tests.slack.conftest import crash_log


def member_text(mib: int, variant: int) -> bytes:
    """`mib` MiB of NCCL INFO lines, two alternating (deflates ~257x, like the issue's
    37 MB zip of 10 GiB); `variant` makes each bomb's content its own (no shared analysis)."""
    two = (f"gpu-node{j:02d}:{1000 + j}:{2000 + j} [{j}] NCCL INFO Channel {j:02d}/0 : "
           f"{j}[{j}] -> {j + 1}[{j + 1}] via P2P/IPC/read\n" for j in range(2))
    lines = f"bomb {variant}\n".encode() + "".join(two).encode()
    return (lines * (mib * 2**20 // len(lines) + 1))[:mib * 2**20]


def zip_bomb(members: int, mib: int, variant: int = 0) -> bytes:
    """A zip of `members` copies of one deflated member (written by hand: compressing the
    whole ~10 GiB would take minutes)."""
    raw = member_text(mib, variant)
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = comp.compress(raw) + comp.flush()
    crc, local, central = zlib.crc32(raw), bytearray(), bytearray()
    for i in range(members):
        name = f"rank{i:03d}.log".encode()
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data),
                             len(raw), len(name), 0) + name + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc,
                               len(data), len(raw), len(name), 0, 0, 0, 0, 0, offset) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, members, members, len(central),
                      len(local), 0)
    return bytes(local + central + end)


def ask_others(bot: Bot, n: int, tag: int) -> dict[str, float]:
    """`n` people each mention the bot with their own crash log; their first answers."""
    files = [bot.slack.add_file(f"train{i}.log", crash_log(f"gpu-node{tag + i:03d}"))
             for i in range(n)]
    threads = [f"{1700000000 + tag + i}.000001" for i in range(n)]
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(lambda i: bot.mention(threads[i], f"UOTHER{i:02d}", "<@UBOT> why did "
                                            "my job die?", [files[i]]), range(n)))
    return bot.first_answers(threads, 600)


def summary(label: str, lat: list[float], n: int) -> str:
    return (f"{label}: {len(lat)}/{n} answered, p50 {percentile(lat, 0.5):.1f} s, "
            f"p95 {percentile(lat, 0.95):.1f} s, max {max(lat, default=float('nan')):.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bombs", type=int, default=4)
    ap.add_argument("--others", type=int, default=10)
    ap.add_argument("--members", type=int, default=160)
    ap.add_argument("--member-mb", type=int, default=64)
    ap.add_argument("--head-start", type=float, default=1.0,
                    help="seconds between the bombs and the others' questions")
    args = ap.parse_args()
    t0 = time.monotonic()
    bombs = [zip_bomb(args.members, args.member_mb, i) for i in range(args.bombs)]
    expanded = args.members * args.member_mb * 2**20
    print(f"{args.bombs} bombs, each {args.members} x {args.member_mb} MiB = "
          f"{expanded / 2**30:.1f} GiB expanded, {len(bombs[0]) / 2**20:.1f} MiB zipped (ratio "
          f"{expanded / len(bombs[0]):.0f}x), different contents; built in "
          f"{time.monotonic() - t0:.1f} s")

    with running_bot() as bot:
        print(f"warm-up: {bot.warm_s:.1f} s")
        ask_others(bot, args.others, 0)  # a first round, not counted: caches warm up
        reference = list(ask_others(bot, args.others, 100).values())

    with running_bot() as bot:
        ask_others(bot, args.others, 200)  # the same first round here
        threads = [f"{1600000000 + i}.000001" for i in range(args.bombs)]
        for i, ts in enumerate(threads):
            f = bot.slack.add_file(f"job-logs-{i}.zip", bombs[i],
                                   mimetype="application/zip", filetype="zip")
            bot.mention(ts, "UBOMB", "<@UBOT> why did my job die?", [f])
        time.sleep(args.head_start)
        loaded = list(ask_others(bot, args.others, 500).values())
        done = bot.finished(threads, 900)
        told = [c.params.get("text", "") for c in bot.slack.of("chat.postEphemeral")
                if c.params.get("user") == "UBOMB"]
        stopped = sum("zip bomb" in bot.thread_text(ts) for ts in threads)

    print(summary("others alone      ", reference, args.others))
    print(summary("others beside bombs", loaded, args.others))
    ratio = percentile(loaded, 0.95) / percentile(reference, 0.95)
    print(f"p95 ratio (beside bombs / alone): {ratio:.2f}x; p50 ratio "
          f"{percentile(loaded, 0.5) / percentile(reference, 0.5):.2f}x")
    print(f"bombs: {len(done)}/{args.bombs} answered "
          f"({', '.join(f'{s:.1f} s' for s in sorted(done.values()))}); "
          f"{stopped} answers carry the stop note; UBOMB was told {len(told)} times: "
          + "; ".join(sorted({t.split(';')[0] for t in told})))
    return 0 if len(loaded) == args.others and max(loaded, default=99) < 10 else 1


if __name__ == "__main__":
    sys.exit(main())
