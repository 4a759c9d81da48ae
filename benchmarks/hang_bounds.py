"""The hang diagnostic's bounds, measured through a real node agent on 127.0.0.1 (as root):

- N fake ranks (default 72), without a debug pipe and with one that never dumps: the wall
  time of one sample with a given deadline;
- three identical requests at once: how many samples ran (the rank counts its pipe writes);
- big dumps (4 ranks x 7 MiB and 4 ranks x 64 MiB): the reply's size and what was dropped.

    .venv/bin/python benchmarks/hang_bounds.py [--ranks 72] [--deadline 15]

Needs py-spy and root (the fake ranks run as uid 4242).
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=72)
    ap.add_argument("--deadline", type=float, default=15.0)
    args = ap.parse_args()
    import httpx

    from tests.agent.conftest import start_agent, stop_agent
    from tests.hang.jobs import fake_ranks, rank_env, shared_dir

    with tempfile.TemporaryDirectory() as tmp:
        agent = start_agent(Path(tmp), "bench-node")
        try:
            def ask(params: dict[str, object]) -> tuple[float, int, dict[str, object]]:
                with agent.client(user="slack:ONCALL", timeout=300) as client:
                    start = time.monotonic()
                    result = client.run("hang", {"ras_port": None, "gpu": False, **params})
                return time.monotonic() - start, len(result.to_json()), result.data

            for mode in ("sleep", "mute"):
                with shared_dir() as d:
                    envs = [rank_env(d, r, args.ranks, FAKE_MODE=mode)
                            for r in range(args.ranks)]
                    with fake_ranks(envs) as procs:
                        took, size, data = ask({"pids": [p.pid for p in procs],
                                                "deadline_s": args.deadline})
                ranks = data["ranks"]
                assert isinstance(ranks, list)
                sampled = sum(1 for r in ranks if r["threads"])
                what = "no debug pipe" if mode == "sleep" else "pipes that never dump"
                print(f"{args.ranks} ranks with {what}, deadline {args.deadline:g} s: answered "
                      f"in {took:.1f} s, {sampled} stacks, {len(ranks) - sampled} not reached "
                      f"(with a note), {size} bytes")

            with shared_dir() as d:
                env = rank_env(d, 0, 1, FAKE_MODE="honest", FAKE_DELAY_S="3")
                with fake_ranks([env]) as procs:
                    got: list[str] = []

                    def one() -> None:
                        r = ask({"pids": [procs[0].pid]})[2]["ranks"]
                        assert isinstance(r, list)
                        got.append(base64.b64decode(r[0]["fr_dump_b64"] or "")[:12].decode())

                    threads = [threading.Thread(target=one) for _ in range(3)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                print(f"3 identical requests at once: dumps {sorted(got)} (dump:N = the N-th "
                      "time the rank's pipe was written)")

            for mib in (7, 64):
                with shared_dir() as d:
                    envs2 = [rank_env(d, r, 4, FAKE_MODE="honest",
                                      FAKE_DUMP_BYTES=str(mib * 2**20)) for r in range(4)]
                    with fake_ranks(envs2) as procs:
                        took, size, data = ask({"pids": [p.pid for p in procs]})
                ranks = data["ranks"]
                assert isinstance(ranks, list)
                kept = sum(1 for r in ranks if r["fr_dump_b64"])
                notes = {r["fr_note"] for r in ranks if r["fr_note"]}
                print(f"4 dumps of {mib} MiB: reply {size / 2**20:.1f} MiB in {took:.1f} s, "
                      f"{kept} dumps kept; notes: {sorted(notes)}")
        except httpx.HTTPError as exc:
            raise SystemExit(f"agent failed: {exc}") from exc
        finally:
            stop_agent(agent)


if __name__ == "__main__":
    main()
