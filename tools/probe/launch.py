"""Start probe workers, watch every step against its time bound, and turn the per-rank
files into one ToolResult. Shared by the single-node probe, an agent's share of a
multi-node probe, and the torchrun (c10d) path.

Each worker writes `rank{R}.progress` before every step and `rank{R}.json` at the end
(see `tools.probe.worker`); a rank whose progress file is older than its step's bound
is stuck. Processes run in their own session so a stuck tree is killed as a whole.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter

from tools.cards import card_for
from tools.params import ProbeProgress, Progress
from tools.probe.busbw import bandwidths, sweep_sizes
from tools.probe.model import ProbeRow, RankFile, StepAt, StepRow
from tools.probe.params import ProbeParams
from tools.probe.worker import FAULT_ENV
from tools.result import Finding, ToolResult

TOOL = "probe"
REPO_ROOT = Path(__file__).resolve().parent.parent
#: After one rank failed, how long the others get to report before they are killed.
GRACE_S = 2.0
#: Extra time for the first step (process start, torch import, rendezvous).
INIT_GRACE_S = 30.0
_RANK_FILE = re.compile(r"^rank(\d+)\.progress$")
T = TypeVar("T")
_STEP_AT: TypeAdapter[StepAt] = TypeAdapter(StepAt)
_RANK_FILE_SHAPE: TypeAdapter[RankFile] = TypeAdapter(RankFile)
#: How often the watcher reports where the sweep is (seconds).
PROGRESS_EVERY_S = 0.5

#: on_progress(where the slowest rank is)
ProgressFn = Progress


@dataclass(frozen=True)
class Command:
    """One process to start: a fixed argument list (never a shell), its env and log name."""

    argv: list[str]
    env: dict[str, str]
    log: str


def worker_args(p: ProbeParams, sizes: Sequence[int], out: Path) -> list[str]:
    """`tools.probe.worker`'s arguments (after `-m tools.probe.worker`)."""
    return ["--backend", p.backend, "--collectives", ",".join(p.collectives),
            "--sizes", ",".join(map(str, sizes)), "--warmup", str(p.warmup),
            "--iters", str(p.iters), "--timeout", str(p.collective_timeout), "--out", str(out)]


def worker_env(fault: str | None, base: Mapping[str, str] | None = None,
               **extra: str) -> dict[str, str]:
    """The workers' environment: `base` (default os.environ) without any inherited fault
    spec, the repository on PYTHONPATH, `extra`, and `fault` only when given explicitly."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if k != FAULT_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), src.get("PYTHONPATH")]))
    env.update(extra)
    if fault:
        env[FAULT_ENV] = fault
    return env


def rank_commands(p: ProbeParams, sizes: Sequence[int], out: Path, ranks: Sequence[int],
                  env: Mapping[str, str]) -> list[Command]:
    """One worker process per rank; local rank = position in `ranks`."""
    argv = [sys.executable, "-m", "tools.probe.worker", *worker_args(p, sizes, out)]
    return [Command(argv, {**env, "RANK": str(rank), "LOCAL_RANK": str(local)}, f"rank{rank}")
            for local, rank in enumerate(ranks)]


def _read(path: Path, shape: TypeAdapter[T]) -> T | None:
    """A worker's file, validated; None while it is missing, half-written or malformed."""
    try:
        return shape.validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def read_progress(path: Path) -> StepAt | None:
    return _read(path, _STEP_AT)


def read_rank(path: Path) -> RankFile | None:
    return _read(path, _RANK_FILE_SHAPE)


def kill(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                p.kill()
    for p in procs:
        p.wait()


def started_ranks(out: Path) -> list[int]:
    """Ranks that wrote a progress file (torchrun assigns them, so they are found here)."""
    found = (_RANK_FILE.match(f.name) for f in out.iterdir()) if out.is_dir() else ()
    return sorted(int(m.group(1)) for m in found if m)


def sweep_position(progress: Mapping[int, StepAt | None],
                   collectives: Sequence[str], sizes: Sequence[int]) -> ProbeProgress | None:
    """Where the slowest rank is: step k of N (0 while starting, N when finished).

    `progress` maps rank -> its last progress record (None once it reported its result).
    """
    steps = len(collectives) * len(sizes)
    slowest: tuple[int, bool, str, int] | None = None
    for prog in progress.values():
        coll, nbytes = (prog or {}).get("collective", "finish"), (prog or {}).get("bytes", 0)
        if coll == "init":
            step = 0
        elif coll in collectives and nbytes in sizes:
            step = list(collectives).index(coll) * len(sizes) + list(sizes).index(nbytes) + 1
        else:
            step = steps
        here = (step, coll == "finish", str(coll), int(nbytes or 0))  # ties: a running rank
        if slowest is None or here[:2] < slowest[:2]:
            slowest = here
    if slowest is None:
        return None
    step, _, coll, nbytes = slowest
    return ProbeProgress(step=step, steps=steps, collective=coll, bytes=nbytes,
                         ranks=len(progress))


@dataclass
class Outcome:
    stuck: str | None
    exit_codes: dict[str, int | None]
    duration_s: float


def run_commands(p: ProbeParams, out: Path, commands: Sequence[Command],
                 ranks: Sequence[int] | None, on_progress: ProgressFn | None = None) -> Outcome:
    """Start `commands`, watch them until done or stuck, kill what is left.

    `ranks`: the ranks whose progress to watch; None to watch whichever ranks appear.
    `on_progress` hears where the sweep is whenever that changes (never raises into here).
    """
    start = time.monotonic()
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for c in commands:
            log = open(out / f"{c.log}.log", "wb")  # noqa: SIM115 - closed below
            logs.append(log)
            procs.append(subprocess.Popen(  # fixed argument list, no shell
                c.argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=c.env,
                start_new_session=True))
        stuck = _watch(p, procs, out, ranks, start, on_progress)
    finally:
        kill(procs)
        for log in logs:
            log.close()
    return Outcome(stuck, {c.log: pr.returncode for c, pr in zip(commands, procs, strict=False)},
                   time.monotonic() - start)


def _watch(p: ProbeParams, procs: Sequence[subprocess.Popen[bytes]], out: Path,
           ranks: Sequence[int] | None, start: float,
           on_progress: ProgressFn | None = None) -> str | None:
    first_failure: float | None = None
    sizes = sweep_sizes(p.min_bytes, p.max_bytes, p.factor)
    last: ProbeProgress | None = None
    next_report = start
    while any(pr.poll() is None for pr in procs):
        now = time.monotonic()
        if now - start > p.timeout:
            return f"overall timeout of {p.timeout:g} s reached"
        seen: dict[int, StepAt | None] = {}  # rank -> progress; None once it reported
        for rank in ranks if ranks is not None else started_ranks(out):
            if (out / f"rank{rank}.json").exists():
                seen[rank] = None
                continue
            prog = read_progress(out / f"rank{rank}.progress")
            if not prog:
                continue
            seen[rank] = prog
            limit = p.collective_timeout + GRACE_S + (
                INIT_GRACE_S if prog.get("collective") == "init" else 0)
            if time.time() - prog.get("t", time.time()) > limit:
                return (f"rank {rank} spent over {p.collective_timeout:g} s in "
                        f"{prog.get('collective')} ({prog.get('bytes')} bytes)")
        if on_progress is not None and now >= next_report:
            next_report = now + PROGRESS_EVERY_S
            where = sweep_position(seen, p.collectives, sizes)
            if where is not None and where != last:
                last = where
                try:
                    on_progress(where)
                except Exception:  # noqa: BLE001 - a listener's failure must not stop the probe
                    pass
        if any(pr.poll() not in (None, 0) for pr in procs):
            first_failure = first_failure or now
            if now - first_failure > GRACE_S:
                return "a rank failed and the others did not finish"
        time.sleep(0.05)
    return None


def merge_rows(ranks: Sequence[RankFile], world: int) -> list[ProbeRow]:
    """Average each step's time over ranks (as nccl-tests does); correct only if all are."""
    merged: dict[tuple[str, int], list[StepRow]] = {}
    for r in ranks:
        for row in r.get("rows", []):
            merged.setdefault((row["collective"], row["bytes"]), []).append(row)
    rows = []
    for (coll, nbytes), group in merged.items():
        t = sum(g["time_us"] for g in group) / len(group)
        algbw, busbw = bandwidths(coll, nbytes, t, world)
        rows.append(ProbeRow(collective=coll, bytes=nbytes, time_us=round(t, 2),
                             algbw_gbps=float(f"{algbw:.6g}"),
                             busbw_gbps=float(f"{busbw:.6g}"),
                             correct=all(g["correct"] for g in group)))
    return rows


def incorrect_findings(rows: Sequence[ProbeRow]) -> list[Finding]:
    bad = [f"{r['collective']}@{r['bytes']}" for r in rows if not r["correct"]]
    if not bad:
        return []
    return [Finding(severity="error", rule="probe_incorrect_result",
                    message=f"wrong results from {', '.join(bad)}: data corruption on the path "
                    "(check Xid, NVLink errors, ACS)", card=card_for("probe_incorrect_result"))]


def report(out: Path, ranks: Sequence[int], outcome: Outcome, invocation: str,
           base: Mapping[str, object], prefix: str = "") -> ToolResult:
    """The ToolResult for `ranks`: merged rows, or which step hung and which ranks failed."""
    results = {r: read_rank(out / f"rank{r}.json") for r in ranks}
    data = {**base, "duration_s": round(outcome.duration_s, 3)}
    ok = [d for d in results.values() if d and d.get("status") == "success"]
    if ranks and len(ok) == len(ranks) and not outcome.stuck:
        rows = merge_rows(ok, int(ok[0].get("world_size") or len(ranks)))
        return ToolResult(tool=TOOL, status="success", invocation=invocation,
                          findings=incorrect_findings(rows),
                          data={**data, "device": ok[0].get("device"), "results": rows})
    unavailable = [d for d in results.values() if d and d.get("status") == "unavailable"]
    if unavailable:
        return ToolResult.unavailable(TOOL, invocation, str(unavailable[0].get("error")), **data)
    return _failure(out, results, outcome, invocation, data, prefix)


def _failure(out: Path, results: dict[int, RankFile | None], outcome: Outcome,
             invocation: str, data: dict[str, object], prefix: str) -> ToolResult:
    hung = [r for r, d in results.items() if d is None]
    failed = {r: str(d.get("error"))[:300] for r, d in results.items()
              if d and d.get("status") == "error"}
    where = {r: read_progress(out / f"rank{r}.progress") or StepAt() for r in hung}
    steps = [w for w in where.values() if w.get("collective") not in (None, "finish")]
    steps += [d.get("failed_at") or {} for r, d in results.items() if r in failed and d]
    step = min(steps, key=lambda w: (w.get("collective") != "init", w.get("bytes") or 0),
               default=StepAt())
    what = "hung" if hung else "failed"
    if not results:
        error = f"{prefix}probe failed before any rank started"
    else:
        error = (f"{prefix}probe {what} in {step.get('collective')} at {step.get('bytes')} "
                 f"bytes; ranks not finished: {hung}; ranks failed: {sorted(failed)}")
    if outcome.stuck:
        error += f" ({outcome.stuck})"
    if failed:
        error += f"; rank {min(failed)}: {failed[min(failed)]}"
    tails = {c: tail(out / f"{c}.log") for c, rc in outcome.exit_codes.items()
             if rc not in (0, None) or not results or c.removeprefix("rank") in map(str, hung)}
    if not results and tails:
        error += "; " + " | ".join(t.strip().splitlines()[-1][:300] for t in tails.values() if t)
    rule = "probe_hang" if hung else "probe_rank_failed"
    result = ToolResult.failed(
        TOOL, invocation, error, **data,
        hang={"collective": step.get("collective"), "bytes": step.get("bytes"),
              "ranks_not_finished": hung, "ranks_failed": failed, "reason": outcome.stuck,
              "where": {r: {"collective": w.get("collective"), "bytes": w.get("bytes")}
                        for r, w in where.items() if w}},
        exit_codes=outcome.exit_codes, log_tails=tails)
    result.findings = [Finding(severity="error", rule=rule, message=error, card=card_for(rule))]
    return result


def tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""
