"""A hung LLM: N concurrent mentions with a crash log, the LLM endpoint accepting connections
and never answering (for `--hang` seconds), through the real Slack path (signed HTTP events,
a local Slack Web API).

    .venv/bin/python benchmarks/slack_llm_hung.py [--mentions 20] [--users 20]

Prints p50/p95/max of the time from each mention to its first answer (the deterministic
answer, posted before the LLM's). Target (issue 18): p95 <= 15 s with 20 mentions. Exit
status 1 when a mention got no first answer within `--timeout`.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slack_harness import Bot, percentile, running_bot

from bot.config import Settings
from tests.slack.conftest import crash_log


class HungLLM:
    """An OpenAI-compatible endpoint on 127.0.0.1 that reads each request and answers
    nothing for `hang_s` seconds (then HTTP 503)."""

    def __init__(self, hang_s: float) -> None:
        self.requests = 0
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests += 1
                owner.release.wait(hang_s)
                try:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the client gave up

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def settings_of(bot: Bot) -> Settings:
    return bot.deps.settings


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mentions", type=int, default=20)
    ap.add_argument("--users", type=int, default=20, help="distinct users sending them")
    ap.add_argument("--hang", type=float, default=120.0)
    ap.add_argument("--timeout", type=float, default=180.0)
    args = ap.parse_args()
    llm = HungLLM(args.hang)
    try:
        with running_bot(llm_provider="openai", llm_model="hung", llm_base_url=llm.base_url,
                         llm_api_key="not-needed") as bot:
            files = [bot.slack.add_file(f"rank{i}.log", crash_log(f"gpu-node{i:02d}"))
                     for i in range(args.mentions)]
            threads = [f"{1600000000 + i}.000001" for i in range(args.mentions)]

            def mention(i: int) -> int:
                return bot.mention(threads[i], f"U{i % args.users:03d}", "<@UBOT> why?",
                                   [files[i]])

            t0 = time.monotonic()
            with ThreadPoolExecutor(args.mentions) as pool:
                statuses = list(pool.map(mention, range(args.mentions)))
            done = bot.first_answers(threads, args.timeout)
            wall = time.monotonic() - t0
            # the LLM is really asked meanwhile (the follow-ups run on their own workers)
            deadline = time.monotonic() + 20
            while llm.requests < min(args.mentions, settings_of(bot).slack_llm_workers) \
                    and time.monotonic() < deadline:
                time.sleep(0.2)
            asked = llm.requests
            llm.release.set()  # the hung calls now fail, so the app stops without waiting
            settings = settings_of(bot)
            print(f"warm-up: {bot.warm_s:.1f} s; LLM: hangs {args.hang:.0f} s per request, "
                  f"llm_timeout_s {settings.llm_timeout_s:.0f}")
    finally:
        llm.close()
    lat = list(done.values())
    print(f"mentions: {args.mentions} from {args.users} users; acked 200: "
          f"{statuses.count(200)}; first answers: {len(done)}; LLM requests hung: {asked}")
    print(f"time to first answer: p50 {percentile(lat, 0.5):.1f} s  "
          f"p95 {percentile(lat, 0.95):.1f} s  max {max(lat, default=float('nan')):.1f} s  "
          f"(wall {wall:.1f} s)")
    return 0 if len(done) == args.mentions else 1


if __name__ == "__main__":
    sys.exit(main())
