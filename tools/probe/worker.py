"""One rank of the collective sweep. Launched by `tools.probe.run` or by torchrun:

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:PORT \
        -m tools.probe.worker --backend nccl --out /tmp/probe

It reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT from the
environment as torchrun sets them, writes `rank{R}.progress` (the step it is in)
before every step and `rank{R}.json` (its rows, or its error) at the end.

Test-only fault injection, `NCCLBOT_PROBE_FAULT` (the node agent ignores it unless
NCCLBOT_AGENT_ALLOW_FAULTS=1; see docs/agent.md). Without `rank=` a fault applies to
every rank the process tree launches; `collective=` and `bytes=` narrow it to steps:
  hang:rank=1:collective=all_reduce:bytes=1024   rank 1 never enters that step
  delay:rank=1:seconds=0.5[:collective=...]      rank 1 sleeps before each timed iteration,
                                                 so the step's time really grows (busbw drops)
  corrupt:rank=0[:collective=all_reduce]         one element of rank 0's input buffers is
                                                 wrong, so the correctness check must fail
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the worker imports nothing it does not need (it starts once per rank)
    from tools.probe.model import StepAt, StepRow

FAULT_ENV = "NCCLBOT_PROBE_FAULT"


def parse_fault(spec: str | None) -> dict[str, str] | None:
    """`kind:key=value:...` -> {"kind": kind, key: value}; None when unset."""
    if not spec:
        return None
    kind, *pairs = spec.split(":")
    fault = {"kind": kind}
    for p in pairs:
        k, _, v = p.partition("=")
        fault[k] = v
    return fault


def _fault_applies(fault: dict[str, str] | None, rank: int, coll: str, nbytes: int) -> bool:
    if not fault or int(fault.get("rank", rank)) != rank:
        return False
    return fault.get("collective", coll) == coll and int(fault.get("bytes", nbytes)) == nbytes


def _write(path: Path, obj: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj))
    tmp.replace(path)


class Sweep:
    """Runs each collective on float32 buffers and checks the result."""

    def __init__(self, torch: Any, dist: Any, rank: int, world: int, device: Any) -> None:
        self.torch, self.dist, self.rank, self.n, self.device = torch, dist, rank, world, device
        #: Test-only: alter one element of this rank's input buffers (the `corrupt` fault).
        self.corrupt = False

    def _full(self, count: int, value: float) -> Any:
        return self.torch.full((count,), float(value), dtype=self.torch.float32,
                               device=self.device)

    def _input(self, x: Any) -> Any:
        """`x` as this rank's input buffer (one element off under the corrupt fault)."""
        if self.corrupt:
            x[0] += 1
        return x

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def op(self, coll: str, nbytes: int) -> tuple[int, Any, Any]:
        """(actual bytes, run(), verify() -> bool) for one step.

        run() is the timed collective on preallocated buffers; verify() checks the
        result (re-running on fresh buffers where run() works in place).
        """
        t, dist, n, r = self.torch, self.dist, self.n, self.rank
        if coll in ("all_reduce", "broadcast", "sendrecv"):
            count = max(1, nbytes // 4)
        else:
            count = max(n, nbytes // 4 // n * n)
        chunk = count // n
        if coll == "all_reduce":
            buf = self._input(self._full(count, 1))

            def fresh_sum() -> bool:
                x = self._input(self._full(count, r + 1))
                dist.all_reduce(x)
                return bool((x == n * (n + 1) / 2).all())
            return count * 4, lambda: dist.all_reduce(buf), fresh_sum
        if coll == "broadcast":
            buf = self._input(self._full(count, 7 if r == 0 else 0))

            def fresh_bcast() -> bool:
                x = self._input(self._full(count, 7 if r == 0 else 0))
                dist.broadcast(x, src=0)
                return bool((x == 7).all())
            return count * 4, lambda: dist.broadcast(buf, src=0), fresh_bcast
        if coll == "all_gather":
            inp, out = self._input(self._full(chunk, r + 1)), self._full(count, 0)
            expect = t.arange(1, n + 1, dtype=t.float32, device=self.device)
            expect = expect.repeat_interleave(chunk)

            gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            return count * 4, lambda: gather(out, inp), lambda: bool(t.equal(out, expect))
        if coll == "reduce_scatter":
            inp, out = self._input(self._full(count, r + 1)), self._full(chunk, 0)

            scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            return (count * 4, lambda: scatter(out, inp),
                    lambda: bool((out == n * (n + 1) / 2).all()))
        if coll == "alltoall":
            inp = t.arange(n, dtype=t.float32, device=self.device).add(r * n)
            inp = self._input(inp.repeat_interleave(chunk))
            out = self._full(count, -1)
            expect = (t.arange(n, dtype=t.float32, device=self.device) * n + r)
            expect = expect.repeat_interleave(chunk)

            return (count * 4, lambda: dist.all_to_all_single(out, inp),
                    lambda: bool(t.equal(out, expect)))
        if coll == "sendrecv":
            send, recv = self._input(self._full(count, r + 1)), self._full(count, 0)
            prev, nxt = (r - 1) % n, (r + 1) % n

            def run() -> None:
                ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prev)]
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
            return count * 4, run, lambda: bool((recv == prev + 1).all())
        raise ValueError(f"unknown collective {coll}")

    def step(self, coll: str, nbytes: int, warmup: int, iters: int,
             delay_s: float = 0.0) -> StepRow:
        """Warm up, time `iters` runs, verify. `delay_s` (test-only fault) stalls this rank
        before each timed run, as a slow GPU or link would: its peers wait in the collective."""
        actual, run, verify = self.op(coll, nbytes)
        for _ in range(warmup):
            run()
        self._sync()
        self.dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            if delay_s:
                time.sleep(delay_s)
            run()
        self._sync()
        elapsed = time.perf_counter() - start
        if iters == 0:
            run()
        row: StepRow = {"collective": coll, "bytes": actual,
                        "time_us": elapsed / max(iters, 1) * 1e6, "correct": verify()}
        return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    ap.add_argument("--collectives", default="all_reduce")
    ap.add_argument("--sizes", required=True, help="comma list of byte sizes")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per collective step")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    args.out.mkdir(parents=True, exist_ok=True)
    result_path, progress = args.out / f"rank{rank}.json", args.out / f"rank{rank}.progress"
    where: StepAt = {"collective": "init", "bytes": 0}
    _write(progress, {**where, "t": time.time()})
    fault = parse_fault(os.environ.get(FAULT_ENV))
    try:
        import torch
        import torch.distributed as dist

        device = torch.device("cpu")
        if args.backend == "nccl":
            if not dist.is_nccl_available() or torch.cuda.device_count() <= local_rank:
                _write(result_path, {"rank": rank, "status": "unavailable", "error":
                                     f"NCCL backend needs a CUDA GPU for local rank {local_rank}"
                                     f" (torch {torch.__version__}, "
                                     f"{torch.cuda.device_count()} GPUs visible)"})
                return 3
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        dist.init_process_group(args.backend, timeout=timedelta(seconds=args.timeout))
        sweep, rows = Sweep(torch, dist, rank, world, device), []
        for coll in [c for c in args.collectives.split(",") if c]:
            if coll == "sendrecv" and world < 2:
                continue
            for nbytes in [int(s) for s in args.sizes.split(",")]:
                where = {"collective": coll, "bytes": nbytes}
                _write(progress, {**where, "t": time.time()})
                hit = fault if _fault_applies(fault, rank, coll, nbytes) else None
                kind = hit["kind"] if hit else None
                if kind == "hang":
                    while True:
                        time.sleep(3600)
                sweep.corrupt = kind == "corrupt"
                delay = float(hit.get("seconds", 1)) if hit and kind == "delay" else 0.0
                rows.append(sweep.step(coll, nbytes, args.warmup, args.iters, delay))
        where = {"collective": "finish", "bytes": 0}
        _write(progress, {**where, "t": time.time()})
        dist.barrier()
        _write(result_path, {"rank": rank, "world_size": world, "status": "success",
                             "device": str(device), "backend": args.backend, "rows": rows})
        dist.destroy_process_group()
        return 0
    except Exception as exc:  # noqa: BLE001 - report the failure to the parent, then exit
        _write(result_path, {"rank": rank, "status": "error", "failed_at": where,
                             "error": f"{type(exc).__name__}: {exc}"[:2000]})
        sys.stdout.flush()
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
