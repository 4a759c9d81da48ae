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


FAKE = Path(__file__).with_name("fake_rank.py")
#: the uid and gid of the fake ranks of "another user"
OTHER_UID = 4242


def other_user_python() -> str:
    """A Python another user may run (the venv's may sit under root's home); skip without
    root (only root can start a process as another user)."""
    if os.geteuid() != 0:
        pytest.skip("starting a process as another user needs root")
    for exe in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(exe, os.X_OK):
            return exe
    pytest.skip("no system python3 for another user")
    raise AssertionError


@contextmanager
def shared_dir() -> Iterator[Path]:
    """A folder in /tmp that any user may write to (sticky, like /tmp itself)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="ncclbot-hang-", dir="/tmp"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def rank_env(folder: Path, rank: int, world: int, **extra: str) -> dict[str, str]:
    """A rank's variables with a debug pipe and dump path in `folder`."""
    return {"PATH": "/usr/bin:/bin", "RANK": str(rank), "LOCAL_RANK": str(rank % 8),
            "WORLD_SIZE": str(world), "TORCHELASTIC_RUN_ID": "fake-job",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555",
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": f"{folder}/pipe_",
            "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{folder}/dump_", **extra}


@contextmanager
def fake_ranks(envs: list[dict[str, str]], uid: int | None = OTHER_UID,
               script: Path = FAKE) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start one fake rank per environment (as `uid`), wait until each is ready, and kill
    them all at the end (they also leave when this process does)."""
    exe = other_user_python() if uid is not None else sys.executable
    creds = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for env in envs:
            procs.append(subprocess.Popen([exe, "-S", str(script)], env=env, cwd="/",
                                          stdout=subprocess.PIPE, **creds))  # type: ignore[call-overload]
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        yield procs
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
        for p in procs:
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
