"""Keep a scorecard run as a test fixture: copy its logs byte for byte, with the machine's
paths scrubbed (the checkout and the virtual environment become /job and /venv).

    .venv/bin/python benchmarks/faults/record.py /tmp/runs/2node-torchrun__exit0_early__rank3__step0 \\
        tests/fixtures/faults/2node-exit0_early-rank3

Flight Recorder dumps (pickles) and plan.json stay behind unless `--dumps` is given: a dump is
then unpickled, its strings scrubbed the same way, and pickled again with its own protocol
(scrubbing the bytes would corrupt the pickle's string lengths).
"""

from __future__ import annotations

import argparse
import pickle
import pickletools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def scrub(data: bytes) -> bytes:
    venv = Path(sys.executable).resolve().parents[1]
    for path, alias in ((str(venv), "/venv"), (str(ROOT), "/job"), ("/work/main", "/job")):
        data = data.replace(path.encode(), alias.encode())
    # a run kept from another checkout of the project (a worktree beside this one)
    return re.sub(rb"/work/wt-[A-Za-z0-9_.-]+", b"/job", data)


def _scrub_value(value: object, seen: dict[str, str]) -> object:
    """`value` (what a Flight Recorder dump holds: dicts, lists, tuples, strings, numbers)
    with every string and bytes scrubbed; equal strings stay one object (`seen`), so the
    pickle refers back to them as torch's did."""
    if isinstance(value, str):
        return seen.setdefault(value, scrub(value.encode()).decode())
    if isinstance(value, bytes):
        return scrub(value)
    if isinstance(value, dict):
        return {_scrub_value(k, seen): _scrub_value(v, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub_value(v, seen) for v in value)
    return value


def pickle_protocol(data: bytes) -> int:
    """The protocol a pickle was written with (its PROTO opcode; 0 or 1 when it has none)."""
    for op, arg, _ in pickletools.genops(data):
        return int(arg) if op.name == "PROTO" and isinstance(arg, int) else 1
    return 0


def scrub_pickle(data: bytes) -> bytes:
    """A Flight Recorder dump (torch's pickle of plain values) with its paths scrubbed, pickled
    again with the protocol it was written with; an empty or unreadable dump (a rank stopped
    while writing it) is kept as it is."""
    try:
        value = pickle.loads(data)  # the harness's own dumps, never a user's
    except Exception:  # a cut-off dump stays as the run left it
        return data
    return pickle.dumps(_scrub_value(value, {}), protocol=pickle_protocol(data))


def record(src: Path, dest: Path, dumps: bool = False) -> list[Path]:
    out = []
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if not p.is_file() or rel.name == "plan.json" or (rel.parts[0] == "dumps" and not dumps):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.parts[0] == "dumps":
            target.write_bytes(scrub_pickle(p.read_bytes()))
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
