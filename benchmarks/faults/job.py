"""A small gloo training-like job for the fault scorecard: a few all_reduces, one injected fault.

FAULT happens on FAULT_RANK at step FAULT_STEP (of STEPS). Every rank that gets that far writes
its Flight Recorder dump to DUMP_DIR/fr_trace_<rank> (as TORCH_FR_DUMP_TEMP_FILE would) when
DUMP_DIR is set. The rank comes from RANK (torchrun, accelerate, the Slurm-style launcher all
set it). The kinds are listed in `benchmarks/faults/kinds.py`.
"""

import datetime
import os
import resource
import signal
import sys
import threading
import time

FAULT = os.environ.get("FAULT", "")
FAULT_RANK = int(os.environ.get("FAULT_RANK", "-1"))
STEP = int(os.environ.get("FAULT_STEP", "2"))
STEPS = int(os.environ.get("STEPS", "5"))
RANK = int(os.environ["RANK"])
TIMEOUT_S = float(os.environ.get("PG_TIMEOUT_S", "5"))
NODE = os.environ.get("NODE_NAME", "")
#: a fault of one rank, or of every rank of one node (FAULT_NODE: an environment set per node)
mine = RANK == FAULT_RANK or bool(NODE and os.environ.get("FAULT_NODE") == NODE)

if mine and FAULT == "nojoin":
    raise SystemExit(3)  # a worker that never joins the group
if mine and FAULT == "wrong_master":
    os.environ["MASTER_ADDR"] = "10.255.255.1"  # an address nobody listens on
if mine and FAULT == "wrong_port":
    os.environ["MASTER_PORT"] = str(int(os.environ["MASTER_PORT"]) + 7)  # nobody listens there
if mine and FAULT == "wrong_world":
    os.environ["WORLD_SIZE"] = str(int(os.environ["WORLD_SIZE"]) + 1)
if mine and FAULT == "bad_ifname":
    os.environ["GLOO_SOCKET_IFNAME"] = "ens9f1"  # an interface this host does not have
# --- the third sealed set (SEALED-3.md), start-up faults ---
if mine and FAULT == "slow_init":
    time.sleep(3 * TIMEOUT_S)  # imports from a slow NFS home
if mine and FAULT == "bad_dns":
    os.environ["MASTER_ADDR"] = "gpu-node-17.cluster.invalid"  # a typo in the node's host file
if mine and FAULT == "import_error":
    import importlib

    importlib.import_module("flash_attn")  # the node's image lacks it: ModuleNotFoundError

# --- the fifth sealed set (SEALED-5.md), start-up faults ---
if mine and FAULT == "dup_rank":
    if NODE and os.environ.get("FAULT_NODE") == NODE:
        os.environ["RANK"] = os.environ["LOCAL_RANK"]  # an old one-node script on this node
    else:
        os.environ["RANK"] = str((RANK + 1) % int(os.environ["WORLD_SIZE"]))  # copy-pasted

# --- the sixth sealed set (SEALED-6.md), start-up faults ---
if mine and FAULT == "no_rank_env":
    os.environ.pop("RANK")  # the node's launch wrapper does not export it: env:// raises

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
WORLD = dist.get_world_size()
#: a second group of every rank (SEALED-2 `subgroup_barrier`): new_group is collective
SUB = dist.new_group(list(range(WORLD))) if FAULT == "subgroup_barrier" else None
#: gradient accumulation from each rank's environment (SEALED-6 `grad_accum_env`)
ACCUM = 2 if mine and FAULT == "grad_accum_env" else 1
if FAULT == "grad_accum_env":
    print(f"rank {RANK}: gradient accumulation steps {ACCUM}", flush=True)


class Net(torch.nn.Module):
    """Two layers; a batch that takes the `skip` branch leaves the second one unused."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor, skip: bool = False) -> torch.Tensor:
        h: torch.Tensor = self.a(x)
        out: torch.Tensor = h.sum() if skip else self.b(h).sum()
        return out


#: DDP training (SEALED-6 `unused_param`): constructing it is collective (a broadcast)
MODEL = torch.nn.parallel.DistributedDataParallel(Net()) if FAULT == "unused_param" else None


def dump() -> None:
    if os.environ.get("DUMP_DIR"):
        with open(f"{os.environ['DUMP_DIR']}/fr_trace_{RANK}", "wb") as fh:
            fh.write(torch._C._distributed_c10d._dump_fr_trace())


def batches() -> "list[int]":
    """This rank's batches: one rank may have fewer (an uneven data split)."""
    n = STEPS
    if mine and FAULT == "fewer_batches":
        n = STEP
    return list(range(n))


def inject(step: int, x: torch.Tensor) -> bool:
    """The fault of this rank at this step; True when the step's all_reduce is replaced."""
    if FAULT == "exception":
        raise RuntimeError(f"injected failure on rank {RANK} at step {step}")
    if FAULT == "value_error":
        raise ValueError(f"invalid label 7 in batch {step} (expected < 5)")
    if FAULT == "sigkill":
        dump()
        os.kill(os.getpid(), signal.SIGKILL)
    if FAULT == "sigsegv":
        dump()
        os.kill(os.getpid(), signal.SIGSEGV)
    if FAULT == "exit1":
        dump()
        os._exit(1)
    if FAULT == "exit0_early":
        print(f"rank {RANK}: nothing left to do, exiting", flush=True)
        dump()
        sys.exit(0)
    if FAULT == "memory_error":
        b = bytearray(1 << 44)  # 16 TiB: Python raises MemoryError
        del b
    if FAULT == "rlimit_as":
        resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))
        y = torch.empty(1 << 33, dtype=torch.uint8)  # 8 GiB under a 2 GiB address-space limit
        del y
    if FAULT == "sleep":
        time.sleep(3 * TIMEOUT_S)
    if FAULT == "slow_ckpt":
        print(f"Saving checkpoint to /ckpt/step_{step}.pt", flush=True)
        time.sleep(3 * TIMEOUT_S)
    if FAULT == "slow_loader":
        time.sleep(2.5 * TIMEOUT_S)  # a data loader worker stuck on slow storage
    if FAULT == "skip":
        return True
    if FAULT == "extra_collective":
        dist.all_reduce(torch.ones(16))
    if FAULT == "barrier_branch":
        dist.barrier()  # a barrier inside `if rank == ...:`
    if FAULT == "mismatch":
        dist.all_reduce(torch.ones(7))
        return True
    if FAULT == "dtype":
        dist.all_reduce(x.double())
        return True
    # --- the sealed kinds (SEALED.md) ---
    if FAULT == "abort":
        os.abort()
    if FAULT == "assert_batch":
        batch_rows, expected = 31, 32
        assert batch_rows == expected, f"batch has {batch_rows} rows, expected {expected}"
    if FAULT == "nan_loss":
        raise FloatingPointError(f"loss is nan at step {step}")
    if FAULT == "sys_exit2":
        sys.exit(2)
    if FAULT == "deadlock":
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()  # never returns
    if FAULT == "gather_vs_reduce":
        dist.all_gather([torch.empty_like(x) for _ in range(WORLD)], x)
        return True
    # --- the second sealed set (SEALED-2.md) ---
    if FAULT == "sigint":
        # a process started from a non-interactive shell's background job inherits SIGINT
        # ignored, and Python then installs no handler: restore the foreground default
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.kill(os.getpid(), signal.SIGINT)  # KeyboardInterrupt at the next bytecode
        time.sleep(1)
    if FAULT == "sigterm_ext":
        os.kill(os.getpid(), signal.SIGTERM)  # default action: the process dies of it
        time.sleep(1)
    if FAULT == "loader_killed":
        from torch.utils.data import DataLoader, Dataset

        class Killed(Dataset[int]):
            def __len__(self) -> int:
                return 4

            def __getitem__(self, i: int) -> int:
                os.kill(os.getpid(), signal.SIGKILL)  # the worker, as the OOM killer does
                return i

        for _ in DataLoader(Killed(), num_workers=1):
            pass
    if FAULT == "disk_full":
        print(f"Saving checkpoint to /ckpt/step_{step}.pt", flush=True)
        with open("/dev/full", "wb") as fh:  # a full disk: ENOSPC on write
            fh.write(b"\0" * (1 << 16))
    if FAULT == "nofile":
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(
            resource.RLIMIT_NOFILE)[1]))
        shards = [open(os.devnull, "rb") for _ in range(4096)]  # noqa: SIM115 (EMFILE)
        del shards
    # --- the third sealed set (SEALED-3.md) ---
    if FAULT == "ckpt_truncated":
        import tempfile

        path = os.path.join(tempfile.mkdtemp(prefix=f"ckpt-rank{RANK}-"), f"step_{step}.pt")
        torch.save({"weight": x}, path)
        with open(path, "rb") as fh:
            data = fh.read()
        with open(path, "wb") as fh:
            fh.write(data[: len(data) // 2])  # a copy to local disk cut off half way
        print(f"Resuming from checkpoint {path}", flush=True)
        torch.load(path)
    if FAULT == "sigbus":
        dump()
        os.kill(os.getpid(), signal.SIGBUS)  # a shared-memory page /dev/shm cannot back
    if FAULT == "node_lost":
        os.kill(os.getpid(), signal.SIGKILL)  # the whole node goes: nothing is written
    if FAULT == "slow_node":
        time.sleep(2.5 * TIMEOUT_S)  # a throttled node: every rank there is slow
    # --- the fourth sealed set (SEALED-4.md) ---
    if FAULT == "sigfpe":
        dump()
        os.kill(os.getpid(), signal.SIGFPE)  # an integer division by zero in native code
    if FAULT == "anomaly_nan":
        with torch.autograd.set_detect_anomaly(True):
            w = torch.zeros(4, requires_grad=True)
            (w / w).sum().backward()  # autograd's anomaly mode raises on the NaN gradient
    if FAULT == "stale_config":
        config = {"lr": 0.1, "warmup": 100}  # an old copy of the config on this node
        print(f"lr schedule: {config['lr_schedule']}", flush=True)  # KeyError
    if FAULT == "node_preempt":
        os.kill(os.getpid(), signal.SIGTERM)  # the cloud reclaims the node: not torchrun
        time.sleep(1)
    if FAULT == "fifo_hang":
        import tempfile

        shard = os.path.join(tempfile.mkdtemp(prefix=f"shard-rank{RANK}-"), "shard-00017.bin")
        os.mkfifo(shard)  # a read that never returns, as on a hung NFS/Lustre mount
        print(f"Loading shard {shard}", flush=True)
        with open(shard, "rb") as fh:
            fh.read()
    # --- the fifth sealed set (SEALED-5.md) ---
    if FAULT == "sighup":
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # the default: the process dies of it
        os.kill(os.getpid(), signal.SIGHUP)  # its ssh session or tmux pane closed
        time.sleep(1)
    if FAULT == "weights_only":
        import argparse
        import tempfile

        path = os.path.join(tempfile.mkdtemp(prefix=f"ckpt-rank{RANK}-"), f"optim_{RANK}.pt")
        # written by an older script that pickled its arguments into every shard
        torch.save({"args": argparse.Namespace(lr=0.1), "state": x}, path)
        print(f"Resuming from checkpoint {path}", flush=True)
        torch.load(path)  # weights_only=True by default: UnpicklingError
    if FAULT == "sigill":
        os.kill(os.getpid(), signal.SIGILL)  # an instruction this node's CPU does not have
    if FAULT == "object_collective":
        metrics: list[object] = [None] * WORLD
        dist.all_gather_object(metrics, {"step": step, "loss": 1.0 / (step + 1)})
    if FAULT == "precision_env":
        dist.all_reduce(x.half())  # mixed precision on, from this node's environment
        return True
    if FAULT == "slow_eval":
        print(f"Running validation at step {step}", flush=True)
        end = time.monotonic() + 3 * TIMEOUT_S
        acc = 0
        while time.monotonic() < end:  # CPU-bound, not a sleep
            acc += sum(range(10_000))
    # --- the sixth sealed set (SEALED-6.md) ---
    if FAULT == "sigusr1":
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)  # no handler: the process dies of it
        os.kill(os.getpid(), signal.SIGUSR1)  # Slurm's requeue warning (--signal=USR1@90)
        time.sleep(1)
    if FAULT == "deep_json":
        import json

        sample = "[" * 100_000 + "]" * 100_000  # one pathologically nested record of its shard
        print(f"rank {RANK}: parsing sample {step} of shard-{RANK:05d}.jsonl", flush=True)
        json.loads(sample)  # RecursionError
    if FAULT == "bad_utf8":
        import tempfile

        shard = os.path.join(tempfile.mkdtemp(prefix=f"shard-rank{RANK}-"), "train-00017.txt")
        with open(shard, "wb") as fh:
            fh.write(b"the quick brown fox\n" * 3 + b"caf\xff au lait\n")  # not UTF-8
        with open(shard, encoding="utf-8") as text:
            for _line in text:  # UnicodeDecodeError
                pass
    if FAULT == "early_destroy":
        print(f"rank {RANK}: early stopping at step {step}", flush=True)
        dist.destroy_process_group()
        raise EarlyStopError
    return False


class EarlyStopError(Exception):
    """The rank's own early-stopping check fired (SEALED-2 `early_destroy`)."""


try:
    # another config on one rank (one more layer): a larger gradient bucket at every step
    x = torch.ones(1280 if mine and FAULT == "layers_config" else 1024)
    for step in batches():
        if mine and FAULT == "missing_shard" and step == 0:
            open(f"/data/train/shard-{RANK:05d}.bin", "rb").close()
        if mine and step == STEP:
            try:
                if inject(step, x):
                    continue
            except EarlyStopError:
                break  # to the end-of-epoch collective, without a default group
        if FAULT == "subgroup_barrier" and step == STEP:
            dist.barrier(group=SUB if mine else None)
        if FAULT == "bcast_size" and step == STEP:
            # every rank broadcasts from rank 0; the faulty rank's tensor has 1280 elements
            dist.broadcast(torch.ones(1280) if mine else x, src=0)
            continue
        if FAULT == "allgather_size" and step == STEP:
            # every rank all_gathers its batch; the faulty rank's is 1000 long, not padded
            mine_x = torch.ones(1000) if mine else x
            dist.all_gather([torch.empty_like(mine_x) for _ in range(WORLD)], mine_x)
            continue
        if FAULT == "bcast_src" and step == STEP:
            # every rank broadcasts from rank 0, the faulty one from another rank
            dist.broadcast(x, src=(RANK if RANK > 0 else 1) if mine else 0)
            continue
        if FAULT == "gen_longer" and step == STEP:
            # every rank generates a sample, one all_reduce per token; this rank's is longer
            for _token in range(8 if mine else 4):
                dist.all_reduce(torch.ones(32))
        if FAULT == "hashseed_order" and step == STEP:
            # two gradient buckets, ordered by iterating a set of parameter names: the order
            # follows PYTHONHASHSEED, which differs on the faulty node
            for size in (512, 1024) if mine else (1024, 512):
                dist.all_reduce(torch.ones(size))
            continue
        if FAULT == "main_first" and step == STEP:
            if mine:  # the main process preprocesses first, the others wait at the barrier
                print(f"rank {RANK}: preprocessing the dataset (main process first)", flush=True)
                time.sleep(3 * TIMEOUT_S)
            dist.barrier()
        if MODEL is not None:
            # DDP all_reduces the gradient bucket in backward; the rank's batch may skip a layer
            loss: torch.Tensor = MODEL(torch.ones(1, 16), skip=mine and step >= STEP)
            torch.autograd.backward(loss)
        elif not (ACCUM == 2 and step >= STEP and (step - STEP) % 2 == 0):
            dist.all_reduce(x)  # (an accumulating micro-step has no gradient all_reduce)
        if step % 2 == 0:
            print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
    # the end of an epoch: every rank reports its metrics
    dist.all_reduce(torch.ones(1))
    print(f"rank {RANK}: done", flush=True)
finally:
    dump()
