"""The collective bandwidth probe: launch one worker process per rank, bound
every step in time, merge per-rank results into nccl-tests style rows.

Workers (`python -m tools.probe_worker`) rendezvous on 127.0.0.1 through the
same environment variables torchrun sets, so a multi-node run is the same
worker under `torchrun --nnodes N --rdzv-endpoint HOST:PORT`. torch is never
imported here: only the workers import it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.baselines import baseline_findings
from tools.busbw import bandwidths, sweep_sizes
from tools.cards import card_for
from tools.probe_worker import FAULT_ENV
from tools.registry import ProbeParams
from tools.result import Finding, ToolResult

TOOL = "probe"
REPO_ROOT = Path(__file__).resolve().parent.parent
#: After one rank failed, how long the others get to report before they are killed.
GRACE_S = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker_argv(p: ProbeParams, sizes: list[int], out: Path) -> list[str]:
    return [sys.executable, "-m", "tools.probe_worker", "--backend", p.backend,
            "--collectives", ",".join(p.collectives), "--sizes", ",".join(map(str, sizes)),
            "--warmup", str(p.warmup), "--iters", str(p.iters),
            "--timeout", str(p.collective_timeout), "--out", str(out)]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _kill(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                p.kill()
    for p in procs:
        p.wait()


def _gpu_info(backend: str) -> tuple[int | None, str | None, str | None]:
    """(GPU count, GPU name, reason when unknown) from NVML, for nccl runs."""
    from tools.nvml import NvmlClient, NvmlUnavailableError

    try:
        with NvmlClient() as c:
            n = c.count()
            return n, c.gpu(0)["name"] if n else None, None
    except NvmlUnavailableError as exc:
        return None, None, str(exc)


def merge_rows(ranks: list[dict[str, Any]], world: int) -> list[dict[str, Any]]:
    """Average each step's time over ranks (as nccl-tests does); correct only if all are."""
    merged: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in ranks:
        for row in r.get("rows", []):
            merged.setdefault((row["collective"], row["bytes"]), []).append(row)
    rows = []
    for (coll, nbytes), group in merged.items():
        t = sum(g["time_us"] for g in group) / len(group)
        algbw, busbw = bandwidths(coll, nbytes, t, world)
        rows.append({"collective": coll, "bytes": nbytes, "time_us": round(t, 2),
                     "algbw_gbps": float(f"{algbw:.6g}"), "busbw_gbps": float(f"{busbw:.6g}"),
                     "correct": all(g["correct"] for g in group)})
    return rows


def run_probe(params: ProbeParams, *, fault: str | None = None) -> ToolResult:
    """Run the sweep (or nccl-tests when `params.nccl_tests` is set). Never raises."""
    p = params
    invocation = (f"probe backend={p.backend} nproc={p.nproc} bytes={p.min_bytes}..{p.max_bytes}"
                  f" x{p.factor:g} warmup={p.warmup} iters={p.iters} "
                  f"collectives={','.join(p.collectives)}")
    if p.nccl_tests:
        from tools.nccl_tests import run_nccl_tests

        return run_nccl_tests(p)
    if importlib.util.find_spec("torch") is None:
        return ToolResult.unavailable(TOOL, invocation, "torch is not installed on this node")
    gpu_name, nproc = None, p.nproc
    if p.backend == "nccl":
        count, gpu_name, reason = _gpu_info(p.backend)
        if not count:
            return ToolResult.unavailable(
                TOOL, invocation, f"the NCCL probe needs GPUs: {reason or 'no GPU found'}; "
                "use backend gloo for a CPU-only check")
        nproc = nproc or count
    nproc = nproc or 2
    sizes = sweep_sizes(p.min_bytes, p.max_bytes, p.factor)
    with tempfile.TemporaryDirectory(prefix="ncclbot-probe-") as tmp:
        out = Path(tmp)
        result = _launch_and_wait(p, sizes, nproc, out, fault, invocation)
    if result.status == "success" and p.plot:
        from tools.plot import plot_busbw

        err = plot_busbw(result.data["results"], p.plot, title=invocation)
        result.data["plot"] = p.plot if err is None else None
        if err:
            result.data["plot_error"] = err
    if result.status == "success":
        result.findings += baseline_findings(result.data["results"], p.backend, gpu_name, nproc)
    return result


def _launch_and_wait(p: ProbeParams, sizes: list[int], nproc: int, out: Path,
                     fault: str | None, invocation: str) -> ToolResult:
    port = free_port()
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    if fault is not None:
        env[FAULT_ENV] = fault
    procs = []
    logs = []
    for rank in range(nproc):
        log = open(out / f"rank{rank}.log", "wb")  # noqa: SIM115 - closed below
        logs.append(log)
        procs.append(subprocess.Popen(  # fixed argument list, no shell
            worker_argv(p, sizes, out), cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}, start_new_session=True))
    start = time.monotonic()
    stuck: str | None = None
    first_failure: float | None = None
    try:
        while any(pr.poll() is None for pr in procs):
            now = time.monotonic()
            if now - start > p.timeout:
                stuck = f"overall timeout of {p.timeout:g} s reached"
                break
            for rank, pr in enumerate(procs):
                prog = _read_json(out / f"rank{rank}.progress")
                if pr.poll() is None and prog and time.time() - prog["t"] > (
                        p.collective_timeout + GRACE_S + (30 if prog["collective"] == "init"
                                                          else 0)):
                    stuck = (f"rank {rank} spent over {p.collective_timeout:g} s in "
                             f"{prog['collective']} ({prog['bytes']} bytes)")
            if stuck:
                break
            if any(pr.poll() not in (None, 0) for pr in procs):
                first_failure = first_failure or now
                if now - first_failure > GRACE_S:
                    stuck = "a rank failed and the others did not finish"
                    break
            time.sleep(0.05)
    finally:
        _kill(procs)
        for log in logs:
            log.close()
    return _collect(out, procs, nproc, stuck, invocation)


def _collect(out: Path, procs: list[subprocess.Popen[bytes]], nproc: int, stuck: str | None,
             invocation: str) -> ToolResult:
    ranks = {r: _read_json(out / f"rank{r}.json") for r in range(nproc)}
    unavailable = [d for d in ranks.values() if d and d.get("status") == "unavailable"]
    if unavailable:
        return ToolResult.unavailable(TOOL, invocation, unavailable[0]["error"])
    ok = [d for d in ranks.values() if d and d.get("status") == "success"]
    if len(ok) == nproc and not stuck:
        rows = merge_rows(ok, nproc)
        findings = []
        bad = [f"{r['collective']}@{r['bytes']}" for r in rows if not r["correct"]]
        if bad:
            findings.append(Finding(severity="error", rule="probe_incorrect_result",
                                    message=f"wrong results from {', '.join(bad)}: data "
                                    "corruption on the path (check Xid, NVLink errors, ACS)",
                                    card=card_for("probe_incorrect_result")))
        return ToolResult(tool=TOOL, status="success", invocation=invocation, findings=findings,
                          data={"backend": ok[0]["backend"], "nproc": nproc,
                                "device": ok[0]["device"], "results": rows})
    return _failure(out, ranks, procs, nproc, stuck, invocation)


def _failure(out: Path, ranks: dict[int, dict[str, Any] | None],
             procs: list[subprocess.Popen[bytes]], nproc: int, stuck: str | None,
             invocation: str) -> ToolResult:
    not_finished = [r for r, d in ranks.items() if d is None]
    failed = {r: d["error"] for r, d in ranks.items() if d and d.get("status") == "error"}
    where = [(_read_json(out / f"rank{r}.progress") or {}) for r in not_finished]
    where += [ranks[r]["failed_at"] for r in failed]  # type: ignore[index]
    steps = [w for w in where if w.get("collective") not in (None, "finish")]
    step = min(steps, key=lambda w: (w["collective"] != "init", w.get("bytes", 0)),
               default={"collective": None, "bytes": None})
    tails = {r: _tail(out / f"rank{r}.log") for r in range(nproc) if r in failed
             or r in not_finished}
    hang = bool(not_finished)
    what = "hung" if hang else "failed"
    error = (f"probe {what} in {step['collective']} at {step['bytes']} bytes; "
             f"ranks not finished: {not_finished}; ranks failed: {sorted(failed)}"
             + (f" ({stuck})" if stuck else ""))
    if failed:
        r0 = min(failed)
        error += f"; rank {r0}: {failed[r0][:300]}"
    rule = "probe_hang" if hang else "probe_rank_failed"
    result = ToolResult.failed(
        TOOL, invocation, error,
        hang={"collective": step["collective"], "bytes": step["bytes"],
              "ranks_not_finished": not_finished, "ranks_failed": failed, "reason": stuck},
        exit_codes={r: pr.returncode for r, pr in enumerate(procs)}, log_tails=tails)
    result.findings = [Finding(severity="error", rule=rule, message=error, card=card_for(rule))]
    return result


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""
