"""A small healthy distributed job: all_reduce, broadcast and barrier over gloo (CPU).

Used to record real logs of a job that ran fine for `knowledge/healthy/` (see its index.yaml):

    TORCH_CPP_LOG_LEVEL=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL \\
      torchrun --standalone --nproc-per-node=2 scripts/healthy_gloo_allreduce.py 2>&1 | tee run.log

STEPS sets the number of all_reduce steps (5); ALLGATHER=1 adds an all_gather_into_tensor.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    steps = int(os.environ.get("STEPS", "5"))
    for step in range(steps):
        t = torch.full((1024,), float(rank + step))
        dist.all_reduce(t)
        expected = sum(r + step for r in range(world))
        assert torch.allclose(t, torch.full_like(t, float(expected)))
        print(f"rank {rank}/{world} step {step} all_reduce ok sum={t[0].item():.0f}", flush=True)
    if os.environ.get("ALLGATHER") == "1":  # also an all_gather_into_tensor (_ALLGATHER_BASE)
        out = torch.empty(world * 4)
        dist.all_gather_into_tensor(out, torch.full((4,), float(rank)))
        assert out.tolist() == [float(r) for r in range(world) for _ in range(4)]
        print(f"rank {rank} all_gather_into_tensor ok", flush=True)
    b = torch.tensor([42.0]) if rank == 0 else torch.zeros(1)
    dist.broadcast(b, src=0)
    dist.barrier()
    print(f"rank {rank} broadcast={b.item():.0f} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
