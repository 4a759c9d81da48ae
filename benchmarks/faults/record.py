"""Keep a scorecard run as a test fixture: copy its logs byte for byte, with the machine's
paths scrubbed (the checkout and the virtual environment become /job and /venv).

    .venv/bin/python benchmarks/faults/record.py /tmp/runs/2node-torchrun__exit0_early__rank3__step0 \\
        tests/fixtures/faults/2node-exit0_early-rank3

Flight Recorder dumps (pickles: scrubbing would corrupt them) and plan.json stay behind unless
`--dumps` is given (then they are copied unscrubbed).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def scrub(data: bytes) -> bytes:
    venv = Path(sys.executable).resolve().parents[1]
    for path, alias in ((str(venv), "/venv"), (str(ROOT), "/job"), ("/work/main", "/job")):
        data = data.replace(path.encode(), alias.encode())
    # a run kept from another checkout of the project (a worktree beside this one)
    return re.sub(rb"/work/wt-[A-Za-z0-9_.-]+", b"/job", data)


def record(src: Path, dest: Path, dumps: bool = False) -> list[Path]:
    out = []
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if not p.is_file() or rel.name == "plan.json" or (rel.parts[0] == "dumps" and not dumps):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.parts[0] == "dumps":
            shutil.copyfile(p, target)
        else:
            target.write_bytes(scrub(p.read_bytes()))
        out.append(target)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--dumps", action="store_true")
    args = ap.parse_args()
    for p in record(args.src, args.dest, args.dumps):
        print(p)


if __name__ == "__main__":
    main()
