"""A real hung job for the hang tests: 4 gloo ranks under torchrun, one stuck in
`load_shard` (see hang_job.py), the others waiting for it in all_reduce."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

JOB = Path(__file__).with_name("hang_job.py")


@dataclass
class HungJob:
    torchrun: subprocess.Popen[bytes]
    pids: list[int]  # the four ranks, by rank
    pipes: Path


def need_py_spy() -> None:
    """Skip without py-spy or the right to read other processes (fail in CI: it has both)."""
    from tools.hang.stacks import py_spy

    why = None if py_spy() else "py-spy is not installed"
    if why is None and os.geteuid() != 0:
        why = "py-spy needs root (or CAP_SYS_PTRACE) to read the ranks' stacks"
    if why and os.environ.get("CI") != "true":
        pytest.skip(why)
    assert why is None, why


def _ranks(torchrun_pid: int) -> list[int]:
    """The ranks (torchrun's children running hang_job.py), by RANK."""
    from tools.hang.procs import find_processes

    def parent(pid: int) -> int:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])

    procs, _ = find_processes(pattern=str(JOB))
    return [p.pid for p in procs if p.rank is not None and parent(p.pid) == torchrun_pid]


@contextmanager
def hung_job(tmp: Path, stuck_rank: int = 2) -> Iterator[HungJob]:
    pytest.importorskip("torch")
    pipes = tmp / "fr"
    pipes.mkdir()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
           "STUCK_RANK": str(stuck_rank), "TORCH_FR_BUFFER_SIZE": "2000",
           "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": f"{pipes}/pipe_",
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{pipes}/dump_"}
    log = tmp / "job.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                 "--nproc-per-node", "4", str(JOB)], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while log.read_text(errors="replace").count(": ready") < 4:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the hung job did not start:\n" + log.read_text()[-2000:])
            time.sleep(0.2)
        time.sleep(0.5)  # the others are in their second all_reduce now
        ranks = _ranks(proc.pid)
        yield HungJob(proc, ranks, pipes)
    finally:
        # torchrun starts each worker in a session of its own: kill the ranks one by one
        for pid in ranks or _ranks(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
