"""Seal the held-back incidents (incidents/sealed.yaml) by a rule fixed before measuring.

Run before any tuning and commit the list. Never read the sealed misses; when the set is spent,
add new incidents and seal those (`--add`: seal the newest unsealed ones only).

    .venv/bin/python scripts/seal_incidents.py            # seal the newest 20% (refuses to reseal)
    .venv/bin/python scripts/seal_incidents.py --add 30   # seal 30 more, newest first
    .venv/bin/python scripts/seal_incidents.py --reseal   # the rule of 2026-11-29 (SEAL_RULE):
        # the newest SEAL_SIZE dated incidents whose threads no card cites; the replaced set is
        # kept under `previous`, undated incidents are listed under `undated`
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.knowledge.cards import card_files, parse_card  # noqa: E402
from bot.knowledge.incidents import (  # noqa: E402
    SEAL_RULE,
    SEAL_SIZE,
    SEALED_FILE,
    choose_sealed,
    incidents_dir,
    load_incidents,
    load_sealed,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fraction", type=float, default=0.2)
    ap.add_argument("--add", type=int, default=0, help="seal this many more (newest unsealed)")
    ap.add_argument("--reseal", action="store_true",
                    help="replace the set by the rule of 2026-11-29, keeping the old one")
    args = ap.parse_args()
    incidents = load_incidents()
    current = load_sealed()
    undated = sorted(i.id for i in incidents if i.date is None)
    if args.reseal:
        cited = [u for p in card_files() for u in parse_card(p.read_text("utf-8")).source_urls]
        ids = choose_sealed(incidents, cited, SEAL_SIZE)
        previous = [p.model_dump(mode="json") for p in current.previous] if current else []
        # a set drawn earlier the same day was never measured: it is replaced, not kept
        if current is not None and current.sealed_on != dt.date.today():
            previous.append({"sealed_on": current.sealed_on.isoformat(), "rule": current.rule,
                             "ids": list(current.ids)})
        data: dict[str, object] = {
            "sealed_on": dt.date.today().isoformat(),
            "rule": SEAL_RULE.format(n=SEAL_SIZE),
            "ids": ids, "undated": undated, "previous": previous,
        }
    else:
        if current is not None and not args.add:
            sys.exit(f"already sealed on {current.sealed_on} ({len(current.ids)} ids); use --add "
                     "or --reseal")
        sealed = set(current.ids) if current else set()
        pool = sorted((i for i in incidents if i.date is not None and i.id not in sealed),
                      key=lambda i: (i.date, i.id), reverse=True)
        n = args.add or round(len(incidents) * args.fraction)
        chosen = pool[:n]
        rule = (f"the newest {n} of {len(incidents)} incidents by thread date (ties by id; "
                "undated incidents are never sealed)"
                if not current else f"{current.rule}; then the newest {n} unsealed ones")
        data = {"sealed_on": dt.date.today().isoformat(), "rule": rule,
                "ids": sorted(sealed | {i.id for i in chosen}), "undated": undated,
                "previous": [p.model_dump(mode="json") for p in current.previous]
                if current else []}
    (incidents_dir() / SEALED_FILE).write_text(yaml.safe_dump(data, sort_keys=False,
                                                              allow_unicode=True),
                                               encoding="utf-8")
    ids_sealed = {str(i) for i in data["ids"]}  # type: ignore[attr-defined]
    dates = [i.date for i in incidents if i.id in ids_sealed and i.date]
    print(f"sealed {len(ids_sealed)} incidents; oldest sealed thread date {min(dates)}; "
          f"{len(undated)} undated incidents stay in development")


if __name__ == "__main__":
    main()
