"""Load test: N concurrent mentions, each with a large crash log, against a local Slack.

    .venv/bin/python benchmarks/slack_load.py [--mentions 50] [--mb 20]

Checks every mention is answered exactly once (none lost, none twice) and prints
throughput and the p50/p95 time from the signed POST to the final answer. The app warms
up first (retrieval index, log scanner), as `ncclbot serve slack` does before it takes
events; the warm-up time is printed on its own. Exit status 1 when a mention was lost,
answered twice, refused or acknowledged later than Slack's 3 seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config import load_settings  # noqa: E402
from bot.slack.app import build_deps, create_app, shutdown, web_client  # noqa: E402
from bot.slack.serve import http_server  # noqa: E402
from tests.slack.conftest import SECRET, Poster, crash_log  # noqa: E402
from tests.slack.fake_slack import BOT_TOKEN, FakeSlack  # noqa: E402

FILLER = (b"gpu-node07: gpu-node07:1234:1290 [2] NCCL INFO Channel 03/0 : 2[2] -> 3[3] via P2P/IPC"
          b"/read\n")


def big_log(mb: int) -> bytes:
    head = crash_log()
    n = max(0, (mb * 2**20 - len(head)) // len(FILLER))
    return FILLER * n + head


def answered(slack: FakeSlack, thread_ts: str) -> int:
    return sum(1 for c in slack.of("chat.update")
               if c.params.get("ts") and "ncclbot_details" in json.dumps(c.params.get("blocks"))
               and slack.messages.get(("C1", c.params["ts"]), {}).get("thread_ts") == thread_ts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mentions", type=int, default=50)
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    data = big_log(args.mb)
    with FakeSlack() as slack, tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SECRET,
                                 slack_api_url=slack.api_url, data_dir=Path(tmp))
        client = web_client(settings)
        deps = build_deps(settings, client)
        app = create_app(settings, client, http=True, deps=deps)
        warm_s = deps.troubleshooter.warm()
        server = http_server(app, "127.0.0.1", 0)
        poster = Poster(f"http://127.0.0.1:{server.port}/slack/events")
        files = [slack.add_file(f"rank{i}.log", data) for i in range(args.mentions)]
        sent: dict[str, float] = {}
        acks: list[float] = []
        refused: list[str] = []

        def mention(i: int) -> None:
            ts = f"{1600000000 + i}.000001"
            t0 = time.monotonic()
            sent[ts] = t0
            try:
                status, _ = poster.event({"type": "app_mention", "user": f"U{i % 7}",
                                          "channel": "C1", "ts": ts, "text": "<@UBOT> why?",
                                          "files": [files[i]]})
            except OSError as exc:
                status = f"{type(exc).__name__}: {exc}"
            acks.append(time.monotonic() - t0)
            if status != 200:
                refused.append(f"{ts}: {status}")

        t_start = time.monotonic()
        with ThreadPoolExecutor(args.mentions) as pool:
            list(pool.map(mention, range(args.mentions)))
        done: dict[str, float] = {}
        deadline = t_start + args.timeout
        while len(done) < len(sent) and time.monotonic() < deadline:
            for c in slack.of("chat.update"):
                if "ncclbot_details" not in json.dumps(c.params.get("blocks")):
                    continue
                thread = slack.messages.get(("C1", c.params["ts"]), {}).get("thread_ts")
                if thread in sent and thread not in done:
                    done[thread] = c.t - sent[thread]
            time.sleep(0.2)
        wall = time.monotonic() - t_start
        time.sleep(1.0)
        counts = {ts: answered(slack, ts) for ts in sent}
        server.stop()
        shutdown(app, wait=False)
    lost = [ts for ts, n in counts.items() if n == 0]
    twice = [ts for ts, n in counts.items() if n > 1]
    lat = sorted(done.values())
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")  # noqa: E731
    total_mb = args.mentions * len(data) / 2**20
    print(f"warm-up: {warm_s:.1f} s (retrieval index, log scanner)")
    print(f"mentions: {args.mentions} x {len(data) / 2**20:.1f} MB = {total_mb:.0f} MB")
    print(f"answered: {len(done)}  lost: {len(lost)}  answered twice: {len(twice)}  "
          f"refused: {len(refused)}  downloads: {slack.downloads}")
    for r in refused[:5]:
        print(f"  refused {r}")
    print(f"ack max: {max(acks) * 1000:.0f} ms   wall: {wall:.1f} s")
    print(f"throughput: {len(done) / wall:.2f} answers/s, {total_mb / wall:.0f} MB/s")
    print(f"time to answer: p50 {p(0.5):.1f} s  p95 {p(0.95):.1f} s  max {lat[-1]:.1f} s"
          if lat else "no answers")
    return 0 if not lost and not twice and not refused and max(acks) < 3 else 1


if __name__ == "__main__":
    sys.exit(main())
