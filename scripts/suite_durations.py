"""Sum a pytest `--durations=0` report per test directory (setup + call + teardown).

    python -m pytest -q --durations=0 > /tmp/run.txt; python scripts/suite_durations.py /tmp/run.txt
"""

from __future__ import annotations

import re
import sys
from collections import Counter

LINE = re.compile(r"\s*([\d.]+)s (setup|call|teardown)\s+(\S+)")


def per_directory(lines: list[str]) -> tuple[Counter[str], Counter[str]]:
    """(seconds, tests) per directory under tests/ (a top-level test file stands alone)."""
    seconds: Counter[str] = Counter()
    tests: Counter[str] = Counter()
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        parts = m.group(3).split("::")[0].split("/")
        where = parts[1] if len(parts) > 2 else "/".join(parts)
        seconds[where] += float(m.group(1))
        tests[where] += m.group(2) == "call"
    return seconds, tests


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        seconds, tests = per_directory(fh.readlines())
    for where, s in seconds.most_common():
        print(f"{s:8.1f} s  {tests[where]:4d} tests  {where}")
    print(f"{sum(seconds.values()):8.1f} s  in all (tests under 5 ms are not listed by pytest)")


if __name__ == "__main__":
    main()
