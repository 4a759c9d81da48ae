"""Find a job's training processes on this node from what torchrun, SLURM and torch put in
their environment (read from /proc; pure parsing apart from the reads)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pydantic import Field

from tools.params import Params
from tools.redact import redact_argv


class RankSelection(Params):
    """Which of this node's processes are the job's ranks (the tools that read ranks share it)."""

    pids: list[int] = Field(default_factory=list, max_length=256,
                            description="the ranks' process ids (default: every process with "
                                        "RANK and LOCAL_RANK in its environment)")
    pattern: str | None = Field(None, max_length=200,
                                description="only processes whose command line contains this "
                                            "text")
    job: str | None = Field(None, max_length=200,
                            description="only this job (TORCHELASTIC_RUN_ID or SLURM_JOB_ID)")


#: At most this many processes are looked at (a node has 8-16 ranks).
MAX_PROCESSES = 256
#: The variables that mark a rank of a distributed job; and the ones kept from it.
MARKERS = ("RANK", "LOCAL_RANK")
JOB_VARS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID")
KEPT = (*MARKERS, "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", *JOB_VARS,
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
        "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE",
        "NCCL_RAS_ENABLE", "NCCL_RAS_ADDR")


#: Command lines of the processes that start a job's ranks (torchrun / the elastic agent,
#: SLURM's step daemon, MPI launchers); the nearest such ancestor is a rank's launcher.
LAUNCHERS = ("torch.distributed.run", "torchrun", "torch.distributed.launch",
             "torch/distributed/run.py", "torchelastic", "slurmstepd", "mpirun", "mpiexec",
             "orted", "prted", "hydra_pmi_proxy", "deepspeed")
#: How far up the parent chain a launcher is looked for.
MAX_DEPTH = 16


@dataclass
class TrainingProcess:
    pid: int
    env: dict[str, str] = field(default_factory=dict)  # only the KEPT variables
    cmdline: str = ""
    ppid: int | None = None
    uid: int | None = None  # effective uid and gid (/proc/PID/status)
    gid: int | None = None
    groups: list[int] = field(default_factory=list)
    #: the parent chain, nearest first, up to and including the launcher
    ancestors: list[int] = field(default_factory=list)
    launcher: int | None = None  # the launcher's pid (or the parent's, when none is known)
    launcher_known: bool = False  # the launcher's command line is a known launcher's
    launcher_uid: int | None = None

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

    @property
    def master(self) -> str | None:
        addr, port = self.env.get("MASTER_ADDR"), self.env.get("MASTER_PORT")
        return f"{addr}:{port}" if addr or port else None

    @property
    def identity(self) -> tuple[str | None, str | None, int | None]:
        """What every rank of one job shares on every node: run id, rendezvous, size."""
        return self.job, self.master, self.world_size


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


@dataclass(frozen=True)
class Status:
    """The lines of `/proc/PID/status` the job's grouping needs."""

    ppid: int | None
    uid: int | None
    gid: int | None
    groups: list[int]


def parse_status(text: str) -> Status:
    """PPid, the effective Uid and Gid, and Groups of a `/proc/PID/status`."""
    fields: dict[str, list[str]] = {}
    for line in text.splitlines()[:80]:
        key, sep, value = line.partition(":")
        if sep and key in ("PPid", "Uid", "Gid", "Groups"):
            fields[key] = value.split()

    def nth(key: str, n: int) -> int | None:
        vals = fields.get(key, [])
        return int(vals[n]) if len(vals) > n and vals[n].isdigit() else None

    return Status(nth("PPid", 0), nth("Uid", 1), nth("Gid", 1),
                  [int(g) for g in fields.get("Groups", [])[:64] if g.isdigit()])


def _cmdline(pid: int, proc: Path) -> str:
    """The command line with secrets redacted per argument (a flag's value goes whole, even
    with spaces in it), before anything can shorten or print it."""
    raw = (proc / str(pid) / "cmdline").read_bytes()[:8192]
    argv = raw.decode(errors="replace").split("\0")
    return " ".join(redact_argv(a for a in argv if a)).strip()


def read_process(pid: int, proc: Path = Path("/proc")) -> TrainingProcess | None:
    """The process if it is a rank of a distributed job; None when it is not, or is gone."""
    try:
        env = parse_environ((proc / str(pid) / "environ").read_bytes())
        if not all(k in env for k in MARKERS):
            return None
        cmd = _cmdline(pid, proc)
        st = parse_status((proc / str(pid) / "status").read_text(errors="replace"))
    except OSError:
        return None
    return TrainingProcess(pid, env, cmd, st.ppid, st.uid, st.gid, st.groups)


def is_launcher(cmdline: str) -> bool:
    return any(mark in cmdline for mark in LAUNCHERS)


def find_launcher(tp: TrainingProcess, proc: Path = Path("/proc")) -> None:
    """Walk up from the process to its launcher (the nearest known launcher, else the
    parent) and record the chain on `tp`."""
    pid, chain = tp.ppid, list[int]()
    while pid and pid > 1 and len(chain) < MAX_DEPTH:
        chain.append(pid)
        try:
            cmd = _cmdline(pid, proc)
            st = parse_status((proc / str(pid) / "status").read_text(errors="replace"))
        except OSError:
            break
        if is_launcher(cmd):
            tp.ancestors, tp.launcher, tp.launcher_known, tp.launcher_uid = (
                chain, pid, True, st.uid)
            return
        pid = st.ppid
    tp.ancestors = chain
    tp.launcher = tp.ppid
    if tp.ppid:
        try:
            tp.launcher_uid = parse_status(
                (proc / str(tp.ppid) / "status").read_text(errors="replace")).uid
        except OSError:
            tp.launcher_uid = None


def _name(tp: TrainingProcess) -> str:
    return f"job {tp.job or '(no id)'}" + (f" ({tp.master or 'no rendezvous'}, WORLD_SIZE "
                                           f"{tp.world_size})" if tp.master or tp.world_size
                                           else "")


def assign_jobs(found: list[TrainingProcess]) -> tuple[list[TrainingProcess], list[str]]:
    """The processes that are ranks of a job, and notes on the others (pure).

    - a process whose parent chain holds another rank is that rank's child (a data-loader
      worker inherits its variables): skipped;
    - a job is its run id (or, without one, its rendezvous MASTER_ADDR:MASTER_PORT and
      WORLD_SIZE), started here by one launcher: a known launcher first, else the one that
      started the most of its ranks. Processes claiming the job from another launcher count
      only when that one is a known launcher of the same user, with the same rendezvous and
      size and other ranks (two torchruns of one job on a node), never a stray process of
      anyone's;
    - ranks >= WORLD_SIZE and a second process with the same rank are dropped.
    """
    notes: list[str] = []
    pids = {tp.pid for tp in found}
    workers = [tp for tp in found if pids.intersection(tp.ancestors)]
    if workers:
        notes.append(f"{len(workers)} child process(es) of ranks (data-loader workers) "
                     "skipped")
    jobs: dict[object, dict[int | None, list[TrainingProcess]]] = {}
    for tp in found:
        if not pids.intersection(tp.ancestors):
            key = tp.job or tp.identity
            jobs.setdefault(key, {}).setdefault(tp.launcher, []).append(tp)
    kept: list[TrainingProcess] = []
    for launchers in jobs.values():
        main, *others = sorted(launchers, key=lambda lp: (
            not launchers[lp][0].launcher_known, -len(launchers[lp]), lp or 0))
        first = launchers[main][0]
        groups = [launchers[main]]
        for lp in others:
            group, one = launchers[lp], launchers[lp][0]
            if (one.launcher_known and one.launcher_uid == first.launcher_uid
                    and {t.identity for t in group} == {first.identity}
                    and not {t.rank for t in group} & {t.rank for t in launchers[main]}):
                groups.append(group)
                continue
            notes.append(
                f"pid(s) {', '.join(str(t.pid) for t in group[:8])} (uid {one.uid}) claim "
                f"{_name(one)} but were not started by its launcher (pid {main}); not counted")
        claimed = sum(len(g) for g in launchers.values())
        seen: dict[int | None, TrainingProcess] = {}
        for tp in sorted((t for g in groups for t in g), key=lambda t: t.pid):
            size = tp.world_size
            if size is not None and tp.rank is not None and tp.rank >= size:
                notes.append(f"pid {tp.pid} says RANK={tp.rank}, not below the WORLD_SIZE "
                             f"{size} of {_name(tp)}; not counted")
            elif tp.rank is not None and tp.rank in seen:
                notes.append(f"pid {tp.pid} says RANK={tp.rank} of {_name(tp)}, like pid "
                             f"{seen[tp.rank].pid}; the second is not counted")
            else:
                seen[tp.rank] = tp
        size = first.world_size
        if size is not None and claimed > size:
            notes.append(f"{claimed} processes claim to be ranks of {_name(first)}, more than "
                         f"its WORLD_SIZE {size}: only {len(seen)} counted")
        kept += seen.values()
    return sorted(kept, key=lambda t: (t.rank is None, t.rank or 0, t.pid)), notes


def find_processes(pids: list[int] | None = None, pattern: str | None = None,
                   job: str | None = None, proc: Path = Path("/proc"),
                   self_pid: int | None = None) -> tuple[list[TrainingProcess], list[str]]:
    """The jobs' ranks on this node, by rank; and notes on what was skipped and why. Only
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
    for tp in found:
        find_launcher(tp, proc)
    kept, more = assign_jobs(found)
    return kept, notes + more


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
