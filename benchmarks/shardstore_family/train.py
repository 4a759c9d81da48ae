"""A torchrun gloo job that trains with all_reduce until one rank opens a shard written by a
newer shardstore: `torchrun --standalone --nproc-per-node=N train.py --bad-rank R --step S`."""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shardstore


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bad-rank", type=int, default=1)
    ap.add_argument("--step", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    grad = torch.ones(1024)
    for step in range(args.steps):
        fmt = 3 if (rank == args.bad_rank % world and step == args.step) else 2
        batch = shardstore.open_shard(f"/data/shards/train-{step:03d}", step * world + rank, fmt)
        grad.mul_(len(batch))
        dist.all_reduce(grad)
        print(f"rank {rank} step {step} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
