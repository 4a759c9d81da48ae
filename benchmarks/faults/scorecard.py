"""The fault-injection scorecard: real torchrun gloo jobs on CPU, each with one fault injected
at rank 0, rank 1 and the last rank; ncclbot is scored on the category and the culprit rank.

Every run keeps what a user would attach: each rank's output as torchrun writes it, torchrun's
own output, and the Flight Recorder dumps. The runs live in a temporary folder (`--keep DIR`
keeps them), never in git.

    .venv/bin/python benchmarks/faults/scorecard.py            # 8 faults x 3 rank positions
    .venv/bin/python benchmarks/faults/scorecard.py --faults exception sleep --ranks 1
    .venv/bin/python benchmarks/faults/scorecard.py --world 3 --step 0   # another job shape
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
JOB = Path(__file__).with_name("job.py")
WORLD = 4

#: fault -> the categories a right answer may name
FAULTS: dict[str, frozenset[str]] = {
    "exception": frozenset({"rank_crashed"}),
    "sigkill": frozenset({"rank_crashed"}),
    "sleep": frozenset({"straggler_or_imbalance", "timeout_too_short"}),
    "skip": frozenset({"collective_mismatch", "straggler_or_imbalance"}),
    "mismatch": frozenset({"collective_mismatch"}),
    "nojoin": frozenset({"rendezvous_failure", "rank_crashed"}),
    "wrong_master": frozenset({"rendezvous_failure", "network_interface"}),
    "port_in_use": frozenset({"rendezvous_failure"}),
}


def run_job(fault: str, rank: int, where: Path, timeout_s: float = 120, world: int = WORLD,
            step: int = 2) -> Path:
    """Run one faulty job (`world` ranks, the fault at `step` of 5); its folder holds logs/,
    torchrun.log and dumps/."""
    where.mkdir(parents=True)
    (where / "dumps").mkdir()
    env = {**os.environ, "FAULT": fault, "FAULT_RANK": str(rank), "DUMP_DIR": str(where / "dumps"),
           "TORCH_FR_BUFFER_SIZE": "2000", "GLOO_SOCKET_IFNAME": "lo", "PG_TIMEOUT_S": "5",
           "OMP_NUM_THREADS": "1", "FAULT_STEP": str(step)}
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
            "--redirects", "3", "--log-dir", str(where / "logs")]
    blocker = None
    if fault == "port_in_use":
        import socket

        blocker = socket.socket()
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        argv += ["--master-addr", "127.0.0.1", "--master-port",
                 str(blocker.getsockname()[1]), "--rdzv-backend", "static", "--nnodes", "1",
                 "--node-rank", "0"]
    else:
        argv += ["--standalone"]
    try:
        proc = subprocess.run([*argv, str(JOB)], env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        out = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = f"{exc.stdout or ''}{exc.stderr or ''}\n(the job was stopped after {timeout_s} s)"
    finally:
        if blocker is not None:
            blocker.close()
    (where / "torchrun.log").write_text(out if isinstance(out, str) else out.decode())
    return where


def judge(where: Path, fault: str, rank: int) -> tuple[bool, bool, str, int | None]:
    """(category right, culprit right, top category, suspect rank) for one run."""
    from bot.logs.sources import expand_inputs
    from bot.service import analyze_sources

    _report, diagnosis = analyze_sources(expand_inputs([str(where)]))
    top = diagnosis.root_causes[0].category if diagnosis.root_causes else "-"
    suspect = diagnosis.suspects[0].rank if diagnosis.suspects else None
    culprit_ok = fault == "port_in_use" or suspect == rank
    return top in FAULTS[fault], culprit_ok, top, suspect


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--faults", nargs="*", default=list(FAULTS))
    ap.add_argument("--world", type=int, default=WORLD, help="ranks per job (default 4)")
    ap.add_argument("--step", type=int, default=2, help="the step (0-4) the fault happens at")
    ap.add_argument("--ranks", nargs="*", type=int,
                    help="fault positions (default: 0, 1 and the last rank)")
    ap.add_argument("--keep", type=Path, help="keep the runs in this folder")
    args = ap.parse_args()
    args.ranks = args.ranks or [0, 1, args.world - 1]
    base = args.keep or Path(tempfile.mkdtemp(prefix="ncclbot-faults-"))
    rows = []
    t0 = time.monotonic()
    for fault in args.faults:
        positions = [0] if fault == "port_in_use" else args.ranks
        for rank in positions:
            start = time.monotonic()
            where = run_job(fault, rank, base / f"{fault}-rank{rank}", world=args.world,
                            step=args.step)
            cat_ok, rank_ok, top, suspect = judge(where, fault, rank)
            rows.append((fault, rank, cat_ok, rank_ok, top, suspect, time.monotonic() - start))
            print(f"{fault:13s} rank {rank}  category {'ok ' if cat_ok else 'NO '} ({top:24s}) "
                  f"culprit {'ok ' if rank_ok else 'NO '} (suspect {suspect})  "
                  f"{rows[-1][-1]:.0f} s", flush=True)
    n = len(rows)
    cats = sum(r[2] for r in rows)
    culprits = sum(r[3] for r in rows)
    print(f"\nruns {n}  category right {cats}/{n} ({cats / n:.0%})  culprit right "
          f"{culprits}/{n} ({culprits / n:.0%})  wall {time.monotonic() - t0:.0f} s")
    for pos in sorted({r[1] for r in rows}):
        mine = [r for r in rows if r[1] == pos]
        print(f"  rank {pos}: category {sum(r[2] for r in mine)}/{len(mine)}, culprit "
              f"{sum(r[3] for r in mine)}/{len(mine)}")
    if not args.keep:
        print(f"(runs kept in {base} until the machine cleans its temporary files)")


if __name__ == "__main__":
    main()
