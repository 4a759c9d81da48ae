"""One bot replica for the tests: claims the events it is given (Slack delivers each one
to it one to three times, in its own order) on a few threads, as the listener pool does,
and prints the ids it won as JSON. `python -m tests.state.replica DB SEED`; it starts
when a line arrives on stdin, so every replica races from the same moment."""

from __future__ import annotations

import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor

from bot.slack.store import Store
from bot.state.db import Database, PostgresDatabase, SqliteDatabase

EVENTS = [f"event:Ev{i:04d}" for i in range(100)]


def deliveries(seed: int) -> list[str]:
    """Every event 1-3 times (Slack's retries), shuffled: this replica's share of traffic."""
    rng = random.Random(seed)
    out = [e for e in EVENTS for _ in range(rng.randint(1, 3))]
    rng.shuffle(out)
    return out


def main() -> None:
    where, seed = sys.argv[1], int(sys.argv[2])
    db: Database = (PostgresDatabase(where) if where.startswith("postgresql://")
                    else SqliteDatabase(where))
    store = Store(db)
    todo = deliveries(seed)
    print("ready", flush=True)
    sys.stdin.readline()
    with ThreadPoolExecutor(4) as pool:
        won = [e for e, new in zip(todo, pool.map(store.claim_event, todo), strict=True) if new]
    store.close()
    print(json.dumps({"delivered": len(todo), "won": won}), flush=True)


if __name__ == "__main__":
    main()
