"""A 4-rank gloo job that hangs: STUCK_RANK blocks in `load_shard` (a data loader stuck on a
read) while the others wait for it in their second all_reduce.

gloo has no debug pipe, so with TORCH_NCCL_DEBUG_INFO_PIPE_FILE set each rank serves one the
way ProcessGroupNCCL's `DumpPipe` does: a FIFO `<stem><rank>.pipe`, read without blocking;
anything written to it makes the rank write its real Flight Recorder dump to
`<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`.
"""

import datetime
import os
import threading
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
rank = dist.get_rank()


def serve_dump_pipe() -> None:
    stem = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"]
    out = os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/tmp/nccl_trace_rank_")
    path = f"{stem}{rank}.pipe"
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path, 0o666)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    while True:
        try:
            data = os.read(fd, 128)
        except BlockingIOError:
            data = b""
        if data:
            with open(f"{out}{rank}", "wb") as fh:
                fh.write(torch._C._distributed_c10d._dump_fr_trace())
        time.sleep(0.1)


if os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"):
    threading.Thread(target=serve_dump_pipe, daemon=True).start()


def load_shard() -> None:
    """A read that never returns (until torchrun, its parent, is gone: no orphan is left)."""
    parent, deadline = os.getppid(), time.monotonic() + 600
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.5)


x = torch.ones(16)
dist.all_reduce(x)
print(f"rank {rank}: ready", flush=True)
if rank == int(os.environ.get("STUCK_RANK", "2")):
    load_shard()
dist.all_reduce(x)
