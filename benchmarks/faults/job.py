"""A small gloo job for the fault scorecard: 4 ranks, a few all_reduces, one injected fault.

FAULT (exception, sigkill, sleep, skip, mismatch, nojoin, wrong_master) happens on
FAULT_RANK at step FAULT_STEP. Every rank that gets that far writes its Flight Recorder
dump to DUMP_DIR/fr_trace_<rank> (as TORCH_FR_DUMP_TEMP_FILE would), whatever happens.
"""

import datetime
import os
import signal
import time

import torch
import torch.distributed as dist

FAULT = os.environ.get("FAULT", "")
FAULT_RANK = int(os.environ.get("FAULT_RANK", "-1"))
STEP = int(os.environ.get("FAULT_STEP", "2"))
RANK = int(os.environ["RANK"])
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT_S", "5")))
mine = RANK == FAULT_RANK

if mine and FAULT == "nojoin":
    raise SystemExit(3)  # a worker that never joins the group
if mine and FAULT == "wrong_master":
    os.environ["MASTER_ADDR"] = "10.255.255.1"  # an address nobody listens on
dist.init_process_group("gloo", timeout=TIMEOUT)


def dump() -> None:
    with open(f"{os.environ['DUMP_DIR']}/fr_trace_{RANK}", "wb") as fh:
        fh.write(torch._C._distributed_c10d._dump_fr_trace())


try:
    x = torch.ones(1024)
    for step in range(5):
        if mine and step == STEP:
            if FAULT == "exception":
                raise RuntimeError(f"injected failure on rank {RANK} at step {step}")
            if FAULT == "sigkill":
                dump()
                os.kill(os.getpid(), signal.SIGKILL)
            if FAULT == "sleep":
                time.sleep(3 * TIMEOUT.total_seconds())
            if FAULT == "skip":
                continue
            if FAULT == "mismatch":
                dist.all_reduce(torch.ones(7))
                continue
        dist.all_reduce(x)
    print(f"rank {RANK}: done", flush=True)
finally:
    dump()
