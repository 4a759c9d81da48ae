"""A 4-rank gloo job for the Flight Recorder tests: SKIP_RANK skips the 4th all_reduce;
every rank writes its Flight Recorder dump to DUMP_DIR/fr_trace_<rank> (and, with JSON_DIR,
its JSON form to JSON_DIR/fr_trace_<rank>.json)."""

import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=4))
r = dist.get_rank()
skip = int(os.environ.get("SKIP_RANK", "-1"))
out = os.environ["DUMP_DIR"]
x = torch.ones(4)
for _step in range(3):
    dist.all_reduce(x)
if r != skip:
    try:
        dist.all_reduce(torch.ones(8))
    except Exception as e:
        print(f"rank {r}: {type(e).__name__}: {str(e)[:300]}", flush=True)
with open(f"{out}/fr_trace_{r}", "wb") as fh:
    fh.write(torch._C._distributed_c10d._dump_fr_trace())
if os.environ.get("JSON_DIR"):  # the same as JSON, as _dump_fr_trace_json writes it
    with open(f"{os.environ['JSON_DIR']}/fr_trace_{r}.json", "wb") as fh:
        fh.write(torch._C._distributed_c10d._dump_fr_trace_json())
if r == skip:  # stay until the others timed out in the collective it skipped (their dumps)
    others = [f"{out}/fr_trace_{o}" for o in range(dist.get_world_size()) if o != r]
    if os.environ.get("JSON_DIR"):
        others += [f"{os.environ['JSON_DIR']}/fr_trace_{o}.json"
                   for o in range(dist.get_world_size()) if o != r]
    deadline = time.monotonic() + 120
    while not all(os.path.exists(p) for p in others) and time.monotonic() < deadline:
        time.sleep(0.1)
