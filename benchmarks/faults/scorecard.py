"""The fault-injection scorecard: real gloo jobs on CPU, started the ways real jobs are
(torchrun on one node with 2 to 8 ranks, two and three torchrun agents as separate nodes,
Slurm-style one process per rank, `accelerate launch`), each with one fault injected on one
rank (or one node); ncclbot is scored on the category and on the culprit rank (and node).

A separate benchmark, not part of the test suite: the full card is ~200 real jobs (about an
hour on two busy cores). Every run keeps what a user would attach (see shapes.py); `--keep DIR`
keeps the runs and `--judge DIR` scores kept runs again without running them.

    .venv/bin/python benchmarks/faults/scorecard.py                 # development kinds
    .venv/bin/python benchmarks/faults/scorecard.py --sealed        # the sealed kinds (once)
    .venv/bin/python benchmarks/faults/scorecard.py --sealed2       # SEALED-2.md (once)
    .venv/bin/python benchmarks/faults/scorecard.py --sealed3       # SEALED-3.md (once)
    .venv/bin/python benchmarks/faults/scorecard.py --sealed4       # SEALED-4.md (once)
    .venv/bin/python benchmarks/faults/scorecard.py --sealed5       # SEALED-5.md (once)
    .venv/bin/python benchmarks/faults/scorecard.py --sealed6       # SEALED-6.md (once)
    .venv/bin/python benchmarks/faults/scorecard.py --kinds exit0_early --shapes 2node-torchrun
    .venv/bin/python benchmarks/faults/scorecard.py --judge /tmp/runs   # score kept runs again

By default each kind runs on three of the eight shapes (rotating; `--full`: all of them), and
each (shape, kind) at one fault position: positions rotate over rank 0, a middle rank, the
last rank and the first rank of another node, and the step over early (0) and late (the last);
`--all-positions` runs every position.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from kinds import BY_NAME as KINDS  # noqa: E402
from kinds import DEV, SEALED, SEALED2, SEALED3, SEALED4, SEALED5, SEALED6, Kind  # noqa: E402
from shapes import BY_NAME as SHAPES  # noqa: E402
from shapes import SHAPES as ALL_SHAPES  # noqa: E402
from shapes import Shape, harness_stopped, host_name, job_limit, run  # noqa: E402

STEPS = 5


@dataclass
class Plan:
    shape: str
    kind: str
    rank: int
    step: int
    node_fault: bool  # the fault is in one node's environment (every rank of that node)

    @property
    def slug(self) -> str:
        where = f"node{SHAPES[self.shape].node_of(self.rank)}" if self.node_fault else \
            f"rank{self.rank}"
        return f"{self.shape}__{self.kind}__{where}__step{self.step}"


#: SEALED-3.md's runs, fixed: (kind, shape, fault rank (a node's first rank for a node-wide
#: fault), step, node-wide)
SEALED3_PLAN: tuple[tuple[str, str, int, int, bool], ...] = (
    ("ckpt_truncated", "torchrun-4-logdir", 1, 0, False),
    ("ckpt_truncated", "2node-torchrun", 2, 4, False),
    ("ckpt_truncated", "slurm-3-files", 2, 0, False),
    ("sigbus", "torchrun-8", 7, 4, False),
    ("sigbus", "3node-torchrun-logdir", 1, 0, False),
    ("sigbus", "accelerate-2", 1, 0, False),
    ("slow_init", "torchrun-2", 1, 0, False),
    ("slow_init", "slurm-4", 0, 0, False),
    ("slow_init", "2node-torchrun", 3, 0, False),
    ("node_lost", "2node-torchrun", 2, 4, True),
    ("node_lost", "3node-torchrun-logdir", 2, 0, True),
    ("node_lost", "torchrun-4-logdir", 2, 0, False),
    ("slow_node", "3node-torchrun-logdir", 1, 4, True),
    ("slow_node", "2node-torchrun", 2, 0, True),
    ("slow_node", "slurm-4", 3, 4, False),
    ("bad_dns", "slurm-4", 1, 0, False),
    ("bad_dns", "accelerate-2", 0, 0, False),
    ("bad_dns", "3node-torchrun-logdir", 2, 0, True),
    ("import_error", "2node-torchrun", 2, 0, True),
    ("import_error", "torchrun-8", 3, 0, False),
    ("import_error", "slurm-3-files", 1, 0, False),
)


#: SEALED-4.md's runs, fixed, in the same form
SEALED4_PLAN: tuple[tuple[str, str, int, int, bool], ...] = (
    ("sigfpe", "torchrun-8", 5, 4, False),
    ("sigfpe", "2node-torchrun", 3, 0, False),
    ("sigfpe", "slurm-4", 2, 0, False),
    ("anomaly_nan", "torchrun-4-logdir", 3, 4, False),
    ("anomaly_nan", "3node-torchrun-logdir", 2, 0, False),
    ("anomaly_nan", "slurm-3-files", 0, 4, False),
    ("stale_config", "2node-torchrun", 2, 0, True),
    ("stale_config", "3node-torchrun-logdir", 1, 4, True),
    ("stale_config", "slurm-4", 0, 0, False),
    ("node_preempt", "2node-torchrun", 2, 4, True),
    ("node_preempt", "3node-torchrun-logdir", 2, 0, True),
    ("node_preempt", "torchrun-4-logdir", 1, 0, False),
    ("fifo_hang", "accelerate-2", 0, 4, False),
    ("fifo_hang", "2node-torchrun", 2, 0, False),
    ("fifo_hang", "slurm-3-files", 1, 4, False),
    ("bcast_size", "torchrun-2", 1, 0, False),
    ("bcast_size", "2node-torchrun", 3, 4, False),
    ("bcast_size", "slurm-4", 3, 4, False),
    ("allgather_size", "torchrun-8", 0, 0, False),
    ("allgather_size", "accelerate-2", 1, 4, False),
    ("allgather_size", "3node-torchrun-logdir", 1, 4, False),
)


#: SEALED-5.md's runs, fixed, in the same form (written with SEALED-5.md, before any was run)
SEALED5_PLAN: tuple[tuple[str, str, int, int, bool], ...] = (
    ("sighup", "torchrun-4-logdir", 2, 4, False),
    ("sighup", "2node-torchrun", 3, 0, False),
    ("sighup", "slurm-3-files", 0, 4, False),
    ("weights_only", "torchrun-8", 6, 0, False),
    ("weights_only", "3node-torchrun-logdir", 1, 4, False),
    ("weights_only", "accelerate-2", 1, 0, False),
    ("sigill", "2node-torchrun", 2, 4, True),
    ("sigill", "3node-torchrun-logdir", 2, 0, True),
    ("sigill", "slurm-4", 1, 4, False),
    ("gen_longer", "torchrun-2", 0, 4, False),
    ("gen_longer", "slurm-4", 3, 0, False),
    ("gen_longer", "2node-torchrun", 2, 4, False),
    ("object_collective", "torchrun-8", 3, 4, False),
    ("object_collective", "accelerate-2", 0, 4, False),
    ("object_collective", "3node-torchrun-logdir", 2, 0, False),
    ("precision_env", "2node-torchrun", 2, 0, True),
    ("precision_env", "3node-torchrun-logdir", 1, 4, True),
    ("precision_env", "torchrun-4-logdir", 3, 0, False),
    ("dup_rank", "2node-torchrun", 2, 0, True),
    ("dup_rank", "3node-torchrun-logdir", 2, 0, True),
    ("dup_rank", "slurm-3-files", 1, 0, False),
    ("slow_eval", "slurm-4", 0, 4, False),
    ("slow_eval", "2node-torchrun", 3, 0, False),
    ("slow_eval", "accelerate-2", 1, 4, False),
)


#: SEALED-6.md's runs, fixed, in the same form (written with SEALED-6.md, before any was run)
SEALED6_PLAN: tuple[tuple[str, str, int, int, bool], ...] = (
    ("sigusr1", "torchrun-8", 5, 4, False),
    ("sigusr1", "3node-torchrun-logdir", 2, 0, False),
    ("sigusr1", "slurm-4", 3, 0, False),
    ("deep_json", "torchrun-4-logdir", 1, 0, False),
    ("deep_json", "2node-torchrun", 2, 4, False),
    ("deep_json", "accelerate-2", 0, 4, False),
    ("bad_utf8", "slurm-3-files", 2, 4, False),
    ("bad_utf8", "2node-torchrun", 3, 0, False),
    ("bad_utf8", "accelerate-2", 1, 0, False),
    ("hashseed_order", "2node-torchrun", 2, 4, True),
    ("hashseed_order", "3node-torchrun-logdir", 1, 0, True),
    ("hashseed_order", "slurm-4", 2, 4, False),
    ("grad_accum_env", "3node-torchrun-logdir", 2, 0, True),
    ("grad_accum_env", "2node-torchrun", 2, 4, True),
    ("grad_accum_env", "torchrun-2", 1, 0, False),
    ("unused_param", "accelerate-2", 1, 0, False),
    ("unused_param", "3node-torchrun-logdir", 2, 0, False),  # not under DETAIL: see SEALED-6
    ("unused_param", "slurm-4", 1, 0, False),  # step 0: at the last step nothing fails
    ("main_first", "slurm-3-files", 0, 0, False),
    ("main_first", "3node-torchrun-logdir", 1, 4, False),
    ("main_first", "torchrun-8", 0, 0, False),
    ("no_rank_env", "2node-torchrun", 2, 0, True),
    ("no_rank_env", "3node-torchrun-logdir", 2, 0, True),
    ("no_rank_env", "slurm-4", 1, 0, False),
)


class SealedSet(NamedTuple):
    """A sealed set: its flag, the label its figures are printed under, its kinds, and its
    fixed plan (None: chosen like development's, from its kinds)."""
    flag: str
    label: str
    kinds: tuple[Kind, ...]
    plan: tuple[tuple[str, str, int, int, bool], ...] | None
    help: str


SEALED_SETS: tuple[SealedSet, ...] = (
    SealedSet("sealed", "sealed", tuple(SEALED), None, "run the sealed kinds (SEALED.md)"),
    SealedSet("sealed2", "sealed-2", tuple(SEALED2), None,
              "run the second sealed set (SEALED-2.md)"),
    SealedSet("sealed3", "sealed-3", tuple(SEALED3), SEALED3_PLAN,
              "run the third sealed set (SEALED-3.md) on its fixed plan"),
    SealedSet("sealed4", "sealed-4", tuple(SEALED4), SEALED4_PLAN,
              "run the fourth sealed set (SEALED-4.md) on its fixed plan"),
    SealedSet("sealed5", "sealed-5", tuple(SEALED5), SEALED5_PLAN,
              "run the fifth sealed set (SEALED-5.md) on its fixed plan"),
    SealedSet("sealed6", "sealed-6", tuple(SEALED6), SEALED6_PLAN,
              "run the sixth sealed set (SEALED-6.md) on its fixed plan"),
)


def plans(shapes: list[Shape], kinds: list[Kind], all_positions: bool, full: bool,
          offset: int = 0) -> list[Plan]:
    """Without `full`, each kind runs on three shapes (rotating), each shape with ~8 kinds;
    another `offset` picks other (shape, kind) pairs, positions and steps."""
    out = []
    for si, shape in enumerate(shapes):
        pos = shape.positions()
        for ki, kind in enumerate(kinds):
            if not full and len(shapes) > 3 and (si - ki + offset) % len(shapes) not in (0, 3, 6):
                continue
            chosen = pos if all_positions else [pos[(si + ki + offset) % len(pos)]]
            for rank in chosen:
                step = 0 if (si + ki + offset) % 2 == 0 else STEPS - 1
                node_fault = (kind.at_start or kind.node_wide) and shape.nodes > 1 \
                    and rank % shape.per_node == 0 and rank > 0
                out.append(Plan(shape.name, kind.name, rank, step, node_fault))
    return out


def judge(where: Path, plan: Plan) -> dict[str, object]:
    """Category right, culprit right (the rank, or any rank/host of the faulty node)."""
    from bot.answering.analysis import analyze_sources
    from bot.logs.sources import expand_inputs

    shape = SHAPES[plan.shape]
    _report, diagnosis = analyze_sources(expand_inputs([str(where)]))
    top = diagnosis.root_causes[0].category if diagnosis.root_causes else "-"
    s = diagnosis.suspects[0] if diagnosis.suspects else None
    node = host_name(shape.node_of(plan.rank))
    if plan.node_fault:
        culprit_ok = s is not None and (
            s.host == node or (s.rank is not None and shape.node_of(s.rank) == shape.node_of(
                plan.rank)))
    else:
        culprit_ok = s is not None and s.rank == plan.rank
        if shape.nodes > 1 and s is not None and s.host is not None:
            culprit_ok = culprit_ok and s.host == node
    return {"category_ok": top in KINDS[plan.kind].right, "culprit_ok": culprit_ok,
            "top": top, "suspect": None if s is None else s.rank,
            "suspect_host": None if s is None else s.host}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for sealed_set in SEALED_SETS:
        ap.add_argument(f"--{sealed_set.flag}", action="store_true", help=sealed_set.help)
    ap.add_argument("--kinds", nargs="*")
    ap.add_argument("--shapes", nargs="*", choices=sorted(SHAPES))
    ap.add_argument("--all-positions", action="store_true")
    ap.add_argument("--full", action="store_true", help="every kind on every shape")
    ap.add_argument("--offset", type=int, default=0,
                    help="pick other (shape, kind) pairs, positions and steps (0-7)")
    ap.add_argument("--keep", type=Path, help="keep the runs in this folder")
    ap.add_argument("--judge", type=Path, help="score the runs kept in this folder again")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds one job may run (default: 90 s stretched by the load per "
                         "core, at most 4x)")
    args = ap.parse_args()
    if args.timeout is None and not args.judge:
        args.timeout = job_limit(90.0, os.getloadavg()[0], os.cpu_count() or 1)
        print(f"one job may run {args.timeout:.0f} s (load {os.getloadavg()[0]:.1f})")
    if args.judge:
        done = sorted(p for p in args.judge.iterdir() if (p / "plan.json").exists())
        todo = [(Plan(**json.loads((p / "plan.json").read_text())), p) for p in done]
        todo = [(pl, p) for pl, p in todo if (not args.kinds or pl.kind in args.kinds)
                and (not args.shapes or pl.shape in args.shapes)]
    else:
        asked = [x for x in SEALED_SETS if getattr(args, x.flag)]
        unplanned = [x.kinds for x in asked if x.plan is None]  # the later set wins
        kinds = [KINDS[k] for k in args.kinds] if args.kinds else list(
            unplanned[-1] if unplanned else DEV)
        shapes = [SHAPES[s] for s in args.shapes] if args.shapes else list(ALL_SHAPES)
        if not shutil.which("accelerate", path=str(Path(sys.executable).parent)):
            print("accelerate is not installed (pip install 'ncclbot[faults]'): its shape is "
                  "skipped")
            shapes = [s for s in shapes if s.launcher != "accelerate"]
        base = args.keep or Path(tempfile.mkdtemp(prefix="ncclbot-faults-"))
        base.mkdir(parents=True, exist_ok=True)
        planned = [x.plan for x in asked if x.plan is not None]
        fixed = planned[-1] if planned else None  # the later set wins
        chosen = [Plan(shape, kind, rank, step, node) for kind, shape, rank, step, node
                  in fixed if shape in {s.name for s in shapes}
                  and (not args.kinds or kind in args.kinds)] if fixed else \
            plans(shapes, kinds, args.all_positions, args.full, args.offset)
        todo = [(pl, base / pl.slug) for pl in chosen]
    where_of = {pl.slug: w for pl, w in todo}
    names = {x.label: {k.name for k in x.kinds} for x in SEALED_SETS}
    rows = []
    t0 = time.monotonic()
    for plan, where in todo:
        start = time.monotonic()
        if not args.judge:
            if where.exists():
                print(f"{plan.slug}: already run, judged as kept")
            else:
                run(SHAPES[plan.shape], plan.kind, plan.rank, where, plan.step, STEPS,
                    plan.node_fault, args.timeout)
                (where / "plan.json").write_text(json.dumps(plan.__dict__))
        ran = time.monotonic() - start
        verdict = judge(where, plan)
        rows.append((plan, verdict))
        stopped = "  STOPPED by the harness" if harness_stopped(where) else ""
        print(f"{plan.shape:22s} {plan.kind:17s} {plan.slug.split('__')[2]:6s} step {plan.step}  "
              f"category {'ok' if verdict['category_ok'] else 'NO'} ({verdict['top']})  "
              f"culprit {'ok' if verdict['culprit_ok'] else 'NO'} (suspect "
              f"{verdict['suspect']} on {verdict['suspect_host']})  {ran:.0f} s{stopped}",
              flush=True)
    sealed_kinds = set().union(*names.values())
    groups = [("development", [r for r in rows if r[0].kind not in sealed_kinds]),
              *((label, [r for r in rows if r[0].kind in kinds_of])
                for label, kinds_of in names.items())]
    for label, mine in groups:
        if not mine:
            continue
        n = len(mine)
        cats = sum(bool(v["category_ok"]) for _, v in mine)
        culs = sum(bool(v["culprit_ok"]) for _, v in mine)
        cut = sum(harness_stopped(where_of[p.slug]) for p, _ in mine)
        print(f"\n{label}: runs {n}  category right {cats}/{n} ({cats / n:.0%})  culprit right "
              f"{culs}/{n} ({culs / n:.0%})  stopped by the harness {cut} (scored as run)")
        for shape in sorted({p.shape for p, _ in mine}):
            sub = [v for p, v in mine if p.shape == shape]
            print(f"  {shape:22s} category {sum(bool(v['category_ok']) for v in sub)}/{len(sub)}"
                  f"  culprit {sum(bool(v['culprit_ok']) for v in sub)}/{len(sub)}")
    print(f"wall {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
