"""Find a job's training processes on this node from what torchrun, SLURM and torch put in
their environment (read from /proc; pure parsing apart from the reads)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

#: At most this many processes are looked at (a node has 8-16 ranks).
MAX_PROCESSES = 256
#: The variables that mark a rank of a distributed job; and the ones kept from it.
MARKERS = ("RANK", "LOCAL_RANK")
JOB_VARS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID")
KEPT = (*MARKERS, "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", *JOB_VARS,
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
        "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE",
        "NCCL_RAS_ENABLE", "NCCL_RAS_ADDR")


@dataclass
class TrainingProcess:
    pid: int
    env: dict[str, str] = field(default_factory=dict)  # only the KEPT variables
    cmdline: str = ""

    def _int(self, key: str) -> int | None:
        value = self.env.get(key, "")
        return int(value) if value.isdigit() else None

    @property
    def rank(self) -> int | None:
        return self._int("RANK")

    @property
    def local_rank(self) -> int | None:
        return self._int("LOCAL_RANK")

    @property
    def world_size(self) -> int | None:
        return self._int("WORLD_SIZE")

    @property
    def job(self) -> str | None:
        return next((self.env[k] for k in JOB_VARS if self.env.get(k)), None)


def parse_environ(raw: bytes) -> dict[str, str]:
    """The KEPT variables of a `/proc/PID/environ` (NUL-separated; nothing else is kept, so no
    secret in the process's environment leaves this function)."""
    out = {}
    for item in raw[:1_048_576].split(b"\0"):
        key, sep, value = item.partition(b"=")
        name = key.decode(errors="replace")
        if sep and name in KEPT:
            out[name] = value.decode(errors="replace")[:4096]
    return out


def read_process(pid: int, proc: Path = Path("/proc")) -> TrainingProcess | None:
    """The process if it is a rank of a distributed job; None when it is not, or is gone."""
    try:
        env = parse_environ((proc / str(pid) / "environ").read_bytes())
        cmd = (proc / str(pid) / "cmdline").read_bytes()[:8192]
    except OSError:
        return None
    if not all(k in env for k in MARKERS):
        return None
    return TrainingProcess(pid, env, cmd.replace(b"\0", b" ").decode(errors="replace").strip())


def find_processes(pids: list[int] | None = None, pattern: str | None = None,
                   job: str | None = None, proc: Path = Path("/proc"),
                   self_pid: int | None = None) -> tuple[list[TrainingProcess], list[str]]:
    """The job's ranks on this node, by rank; and notes on what was skipped and why. Only
    processes with a rank in their environment are ever returned, whatever `pids` names;
    `pattern` is plain text the command line must contain (no regex: callers are remote)."""
    notes: list[str] = []
    if pids:
        candidates = sorted(set(pids))[:MAX_PROCESSES]
    else:
        candidates = sorted(int(p.name) for p in proc.iterdir() if p.name.isdigit())
    found: list[TrainingProcess] = []
    for pid in candidates:
        if pid == self_pid:
            continue
        tp = read_process(pid, proc)
        if tp is None:
            if pids:
                notes.append(f"pid {pid}: not a rank of a distributed job (no RANK and "
                             "LOCAL_RANK in its environment), or gone; skipped")
            continue
        if pattern and pattern not in tp.cmdline:
            continue
        if job is not None and tp.job != job:
            continue
        found.append(tp)
        if len(found) >= MAX_PROCESSES:
            notes.append(f"stopped at {MAX_PROCESSES} processes")
            break
    # data-loader workers inherit their rank's variables: keep the first (oldest) process
    by_rank: dict[tuple[str | None, int | None], TrainingProcess] = {}
    for tp in found:
        by_rank.setdefault((tp.job, tp.rank), tp)
    return sorted(by_rank.values(), key=lambda t: (t.rank is None, t.rank or 0)), notes


#: a versioned library file (libnccl.so.2.21.5) and a pip wheel's folder
#: (site-packages/nvidia/nccl/lib/libnccl.so.2 beside nvidia_nccl_cu12-2.27.5.dist-info)
_LIB_VERSION = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)$")
_WHEEL = re.compile(r"^nvidia_nccl_cu\d+-(\d+\.\d+\.\d+)[^/]*\.dist-info$")


def nccl_version_of(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The NCCL version a rank loaded, from the library mapped into it: the number in a
    versioned file name, or the pip wheel's dist-info beside it; None when neither says."""
    try:
        with (proc / str(pid) / "maps").open(errors="replace") as fh:
            libs = {line.split(None, 5)[-1].strip() for line in fh if "libnccl.so" in line}
    except OSError:
        return None
    for lib in sorted(libs):
        if m := _LIB_VERSION.search(lib):
            return m.group(1)
        path = PurePosixPath(lib)
        if path.parent.name == "lib" and path.parent.parent.name == "nccl":
            site = proc / str(pid) / "root" / str(path.parents[3]).lstrip("/")
            try:
                names = [p.name for p in site.iterdir() if p.name.startswith("nvidia_nccl")]
            except OSError:
                continue
            for name in names:
                if m := _WHEEL.match(name):
                    return m.group(1)
    return None
