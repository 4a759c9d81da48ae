"""This node's share of a multi-node probe: launch its ranks into an env:// rendezvous.

Rank r of node n is global rank n * nproc + r; node 0's rank 0 hosts the TCP store on
MASTER_ADDR:MASTER_PORT, as torchrun's static rendezvous does. Each agent reports the
rows its own ranks measured and, on failure, which of its ranks hung or failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.busbw import sweep_sizes
from tools.probe import GRACE_S, REPO_ROOT, merge_rows, worker_argv
from tools.registry import ProbeParams
from tools.result import Finding, ToolResult

TOOL = "probe"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _kill(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                p.kill()
    for p in procs:
        p.wait()


def run_group_member(p: ProbeParams, master_addr: str, master_port: int, node_rank: int,
                     nnodes: int) -> ToolResult:
    """Run this node's ranks of one multi-node sweep; never raises."""
    nproc = p.nproc or 1
    world = nproc * nnodes
    ranks = [node_rank * nproc + r for r in range(nproc)]
    invocation = (f"probe backend={p.backend} node_rank={node_rank}/{nnodes} nproc={nproc} "
                  f"rdzv={master_addr}:{master_port} bytes={p.min_bytes}..{p.max_bytes} "
                  f"collectives={','.join(p.collectives)}")
    sizes = sweep_sizes(p.min_bytes, p.max_bytes, p.factor)
    env = {**os.environ, "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
           "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(nproc),
           "GROUP_RANK": str(node_rank),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ncclbot-group-") as tmp:
        out = Path(tmp)
        procs: list[subprocess.Popen[bytes]] = []
        logs = []
        stuck = None
        try:
            for local, rank in enumerate(ranks):
                log = open(out / f"rank{rank}.log", "wb")  # noqa: SIM115 - closed below
                logs.append(log)
                procs.append(subprocess.Popen(  # fixed argument list, no shell
                    worker_argv(p, sizes, out), cwd=REPO_ROOT, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                    env={**env, "RANK": str(rank), "LOCAL_RANK": str(local)}))
            stuck = _wait(p, procs, out, ranks, start)
        finally:
            _kill(procs)
            for log in logs:
                log.close()
        return _report(p, out, ranks, world, node_rank, stuck, invocation,
                       time.monotonic() - start)


def _wait(p: ProbeParams, procs: list[subprocess.Popen[bytes]], out: Path, ranks: list[int],
          start: float) -> str | None:
    first_failure = None
    while any(pr.poll() is None for pr in procs):
        now = time.monotonic()
        if now - start > p.timeout:
            return f"overall timeout of {p.timeout:g} s reached"
        for rank, pr in zip(ranks, procs, strict=True):
            prog = _read(out / f"rank{rank}.progress")
            limit = p.collective_timeout + GRACE_S + (30 if prog and
                                                      prog["collective"] == "init" else 0)
            if pr.poll() is None and prog and time.time() - prog["t"] > limit:
                return (f"rank {rank} spent over {p.collective_timeout:g} s in "
                        f"{prog['collective']} ({prog['bytes']} bytes)")
        if any(pr.poll() not in (None, 0) for pr in procs):
            first_failure = first_failure or now
            if now - first_failure > GRACE_S:
                return "a rank failed and the others did not finish"
        time.sleep(0.05)
    return None


def _report(p: ProbeParams, out: Path, ranks: list[int], world: int, node_rank: int,
            stuck: str | None, invocation: str, duration: float) -> ToolResult:
    results = {r: _read(out / f"rank{r}.json") for r in ranks}
    base = {"backend": p.backend, "node_rank": node_rank, "ranks": ranks, "world_size": world,
            "duration_s": round(duration, 3)}
    ok = [d for d in results.values() if d and d.get("status") == "success"]
    if len(ok) == len(ranks) and not stuck:
        return ToolResult(tool=TOOL, status="success", invocation=invocation,
                          data={**base, "results": merge_rows(ok, world)})
    unavailable = [d for d in results.values() if d and d.get("status") == "unavailable"]
    if unavailable:
        return ToolResult.unavailable(TOOL, invocation, unavailable[0]["error"], **base)
    hung = [r for r, d in results.items() if d is None]
    failed = {r: d["error"][:300] for r, d in results.items() if d and d.get("status") == "error"}
    where = {r: _read(out / f"rank{r}.progress") for r in hung}
    error = (f"node rank {node_rank}: ranks not finished {hung}, ranks failed {sorted(failed)}"
             + (f" ({stuck})" if stuck else ""))
    if failed:
        error += f"; rank {min(failed)}: {failed[min(failed)]}"
    rule = "probe_hang" if hung else "probe_rank_failed"
    result = ToolResult.failed(TOOL, invocation, error, **base, hang={
        "ranks_not_finished": hung, "ranks_failed": failed, "reason": stuck,
        "where": {r: {"collective": w.get("collective"), "bytes": w.get("bytes")}
                  for r, w in where.items() if w}})
    result.findings = [Finding(severity="error", rule=rule, message=error)]
    return result
