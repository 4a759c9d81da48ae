"""Launch shapes of the fault scorecard: how a faulty job is started and what it leaves behind.

Every shape writes what a user would attach, as the launcher writes it:
- `torchrun`: one node, `--standalone`, N ranks; with `--log-dir` (torchrun's per-rank files and
  its own output in torchrun.log) or with `--tee 3` (everything in torchrun.log, prefixed).
- `multinode`: two or three torchrun agents on loopback (`--nnodes`, `--node-rank`, c10d
  rendezvous), each agent's console in its own file named after its node (gpu-node-01.log, ...).
- `slurm`: one process per rank started by hand with env:// (as `srun` does); either one file
  interleaved with `srun -l` style `N: ` prefixes, or one file per rank (rank-N.log).
- `accelerate`: `accelerate launch --multi_gpu --cpu`-style launch of the same job (CPU).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

JOB = Path(__file__).with_name("job.py")


@dataclass(frozen=True)
class Shape:
    name: str
    launcher: str  # torchrun | multinode | slurm | accelerate
    world: int
    nodes: int = 1
    log_dir: bool = False  # torchrun --log-dir/--redirects (else --tee)
    detail: bool = False  # TORCH_DISTRIBUTED_DEBUG=DETAIL
    dumps: bool = False  # Flight Recorder dumps
    per_rank_files: bool = False  # slurm: one file per rank (else interleaved)

    @property
    def per_node(self) -> int:
        return self.world // self.nodes

    def node_of(self, rank: int) -> int:
        return rank // self.per_node

    def positions(self) -> list[int]:
        """Rank 0, a middle rank, the last rank (and the first rank of every other node)."""
        out = [0, self.world // 2 if self.world > 2 else 1, self.world - 1]
        out += [n * self.per_node for n in range(1, self.nodes)]
        return sorted(set(out))


SHAPES: tuple[Shape, ...] = (
    Shape("torchrun-2", "torchrun", 2, detail=True),
    Shape("torchrun-4-logdir", "torchrun", 4, log_dir=True, dumps=True),
    Shape("torchrun-8", "torchrun", 8, dumps=True),
    Shape("2node-torchrun", "multinode", 4, nodes=2, detail=True),
    Shape("3node-torchrun-logdir", "multinode", 3, nodes=3, log_dir=True, dumps=True),
    Shape("slurm-4", "slurm", 4),
    Shape("slurm-3-files", "slurm", 3, per_rank_files=True, detail=True),
    Shape("accelerate-2", "accelerate", 2),
)
BY_NAME = {s.name: s for s in SHAPES}


#: what `_capture` writes into a job's logs when it had to stop the job at its limit
STOPPED = "(the job was stopped after"


def harness_stopped(where: Path) -> bool:
    """Whether the harness stopped this run at its time limit (its logs are then cut short:
    a miss there is the harness's, not the diagnosis's)."""
    return any(STOPPED in f.read_text(errors="replace")
               for f in where.rglob("*.log") if f.is_file())


def job_limit(base_s: float, load: float, cores: int) -> float:
    """The time one job may run: `base_s` on an idle machine, stretched by the load per core
    (at most 4x), so a busy machine slows a job down rather than cutting it short."""
    return base_s * min(4.0, max(1.0, load / max(1, cores)))


def host_name(node: int) -> str:
    return f"gpu-node-{node + 1:02d}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def base_env(where: Path, shape: Shape, fault: str, rank: int, step: int, steps: int,
             fault_node: str = "") -> dict[str, str]:
    env = {**os.environ, "FAULT": fault, "FAULT_RANK": str(rank), "FAULT_STEP": str(step),
           "STEPS": str(steps), "GLOO_SOCKET_IFNAME": "lo", "PG_TIMEOUT_S": "5",
           "OMP_NUM_THREADS": "1", "TORCH_FR_BUFFER_SIZE": "2000", "FAULT_NODE": fault_node}
    env.pop("TORCH_DISTRIBUTED_DEBUG", None)
    if shape.detail:
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    if shape.dumps:
        (where / "dumps").mkdir(exist_ok=True)
        env["DUMP_DIR"] = str(where / "dumps")
    return env


def _torchrun_args(shape: Shape, out: Path) -> list[str]:
    if shape.log_dir:
        return ["--redirects", "3", "--log-dir", str(out)]
    return ["--tee", "3"]


def run(shape: Shape, fault: str, rank: int, where: Path, step: int = 2, steps: int = 5,
        node_fault: bool = False, timeout_s: float = 90) -> Path:
    """Run one faulty job in `where` (created); returns it."""
    where.mkdir(parents=True)
    node = host_name(shape.node_of(rank)) if node_fault else ""
    env = base_env(where, shape, fault, -1 if node_fault else rank, step, steps, node)
    if shape.launcher == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", str(shape.world), *_torchrun_args(shape, where / "logs"),
                str(JOB)]
        _capture([(argv, env, where / "torchrun.log", None)], timeout_s)
    elif shape.launcher == "multinode":
        port = free_port()
        procs = []
        for n in range(shape.nodes):
            host = host_name(n)
            argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(shape.nodes),
                    "--node-rank", str(n), "--nproc-per-node", str(shape.per_node),
                    "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                    "--rdzv-id", "job17", "--rdzv-conf", f"is_host={'1' if n == 0 else '0'}",
                    *_torchrun_args(shape, where / host / "logs"), str(JOB)]
            out = where / host / "torchrun.log" if shape.log_dir else where / f"{host}.log"
            out.parent.mkdir(exist_ok=True)
            procs.append((argv, {**env, "NODE_NAME": host}, out, None))
        _capture(procs, timeout_s)
    elif shape.launcher == "slurm":
        port = free_port()
        procs = []
        shared = where / "slurm-job17.out"
        for r in range(shape.world):
            argv = [sys.executable, str(JOB)]
            e = {**env, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(shape.world),
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NODE_NAME": host_name(0)}
            if shape.per_rank_files:
                procs.append((argv, e, where / f"rank-{r}.log", None))
            else:
                procs.append((argv, e, shared, f"{r}: "))
        _capture(procs, timeout_s)
    elif shape.launcher == "accelerate":
        port = free_port()
        exe = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        argv = [exe or "accelerate", "launch", "--multi_gpu", "--num_processes",
                str(shape.world), "--num_machines", "1", "--main_process_port", str(port),
                "--monitor_interval", "1", str(JOB)]
        _capture([(argv, env, where / "accelerate.log", None)], timeout_s)
    else:
        raise ValueError(shape.launcher)
    return where


Proc = tuple[list[str], dict[str, str], Path, "str | None"]


def _capture(procs: list[Proc], timeout_s: float) -> None:
    """Start every process, copy its output (stdout and stderr merged, line by line, with an
    optional prefix) into its file; stop them all after `timeout_s`."""
    lock = threading.Lock()
    files: dict[Path, object] = {}
    running = []
    threads = []
    for argv, env, out, prefix in procs:
        fh = files.get(out)
        if fh is None:
            fh = files[out] = out.open("w")
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
        running.append(p)

        def pump(p: subprocess.Popen[str] = p, fh: object = fh, prefix: str | None = prefix,
                 ) -> None:
            assert p.stdout is not None
            for line in p.stdout:
                with lock:
                    fh.write((prefix or "") + line)  # type: ignore[attr-defined]
                    fh.flush()  # type: ignore[attr-defined]

        t = threading.Thread(target=pump, daemon=True)
        t.start()
        threads.append(t)
    deadline = time.monotonic() + timeout_s
    for p in running:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    stopped = False
    for p in running:
        if p.poll() is None:
            stopped = True
            os.killpg(p.pid, 9)
            p.wait()
    for t in threads:
        t.join(5)
    for fh in files.values():
        if stopped:
            fh.write(f"{STOPPED} {timeout_s:.0f} s)\n")  # type: ignore[attr-defined]
        fh.close()  # type: ignore[attr-defined]
