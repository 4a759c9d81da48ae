"""Seal the newest incidents (by thread date) as the held-back set: incidents/sealed.yaml.

Run once, before any tuning, and commit the list. Never read the sealed misses; when the set
is spent, add new incidents and seal those (`--add`: seal the newest unsealed ones only).

    .venv/bin/python scripts/seal_incidents.py            # seal the newest 20% (refuses to reseal)
    .venv/bin/python scripts/seal_incidents.py --add 30   # seal 30 more, newest first
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.knowledge.incidents import SEALED_FILE, incidents_dir, load_incidents, load_sealed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fraction", type=float, default=0.2)
    ap.add_argument("--add", type=int, default=0, help="seal this many more (newest unsealed)")
    args = ap.parse_args()
    incidents = load_incidents()
    current = load_sealed()
    if current is not None and not args.add:
        sys.exit(f"already sealed on {current.sealed_on} ({len(current.ids)} ids); use --add")
    sealed = set(current.ids) if current else set()
    dated = [i for i in incidents if i.date is not None]
    pool = sorted((i for i in dated if i.id not in sealed), key=lambda i: (i.date, i.id),
                  reverse=True)
    n = args.add or round(len(incidents) * args.fraction)
    chosen = pool[:n]
    rule = (f"the newest {n} of {len(incidents)} incidents by thread date (ties by id; "
            "undated incidents are never sealed)"
            if not current else f"{current.rule}; then the newest {n} unsealed ones")
    data = {
        "sealed_on": dt.date.today().isoformat(),
        "rule": rule,
        "ids": sorted(sealed | {i.id for i in chosen}),
    }
    (incidents_dir() / SEALED_FILE).write_text(yaml.safe_dump(data, sort_keys=False),
                                               encoding="utf-8")
    print(f"sealed {len(data['ids'])} incidents; oldest sealed thread date "
          f"{min(i.date for i in chosen if i.date)}; {len(incidents) - len(dated)} undated "
          "incidents stay in development")


if __name__ == "__main__":
    main()
