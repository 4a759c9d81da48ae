"""Read which libraries the job's ranks on this node mapped (the I/O half of `libs`).

The ranks are found as `hang` finds them (`tools.hang.procs.find_processes`: only
processes with RANK and LOCAL_RANK in their environment); each one's `/proc/PID/maps`
names the files it mapped, and wheel directories are listed through `/proc/PID/root`, so a
rank in a container is read in its own file system. Nothing of a file is read but names.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from tools.hang.procs import find_processes, nccl_version_of
from tools.libs.maps import LoadedLib, loaded_libs
from tools.result import Finding, ToolResult

#: at most this much of one process's maps is read
MAX_MAPS_BYTES = 4 * 2**20


class RankLibs(BaseModel):
    pid: int
    rank: int | None
    job: str | None
    #: family -> versions seen in this process (two means two copies were loaded)
    versions: dict[str, list[str]]
    paths: dict[str, list[str]]
    error: str | None = None


def read_rank(pid: int, proc: Path = Path("/proc")) -> tuple[list[LoadedLib], str | None]:
    """The tracked libraries process `pid` mapped, or why they could not be read."""
    root = proc / str(pid) / "root"
    try:
        with (proc / str(pid) / "maps").open("rb") as fh:
            text = fh.read(MAX_MAPS_BYTES).decode(errors="replace")
    except OSError as exc:
        return [], f"cannot read /proc/{pid}/maps: {exc.strerror or exc}"

    def list_dir(path: str) -> list[str]:
        return [p.name for p in (root / path.lstrip("/")).iterdir()]

    libs = loaded_libs(text, list_dir)
    # the NCCL number as `hang` reads it (versioned name, or the wheel beside it)
    if any(lib.family == "nccl" and lib.source != "file name" for lib in libs) and (
            nccl := nccl_version_of(pid, proc)):
        libs = [LoadedLib(x.family, x.path, nccl, "wheel") if x.family == "nccl"
                and x.source != "file name" else x for x in libs]
    return libs, None


def rank_libs(pid: int, rank: int | None, job: str | None, libs: list[LoadedLib],
              error: str | None) -> RankLibs:
    versions: dict[str, list[str]] = {}
    paths: dict[str, list[str]] = {}
    for lib in libs:
        v = lib.version or "unknown"
        if v not in versions.setdefault(lib.family, []):
            versions[lib.family].append(v)
        paths.setdefault(lib.family, []).append(lib.path)
    return RankLibs(pid=pid, rank=rank, job=job, versions=versions, paths=paths, error=error)


def findings(ranks: list[RankLibs]) -> list[Finding]:
    """Two copies of a library in one rank; ranks of one job on different versions (pure)."""
    out = []
    for r in ranks:
        for family, vs in r.versions.items():
            if len(vs) > 1:
                out.append(Finding(severity="warn", rule="libs_two_copies",
                                   message=f"rank {r.rank} (pid {r.pid}) mapped {len(vs)} "
                                           f"{family} libraries: {', '.join(vs)}"))
    jobs: dict[str | None, list[RankLibs]] = {}
    for r in ranks:
        jobs.setdefault(r.job, []).append(r)
    for job, members in jobs.items():
        families = sorted({f for r in members for f in r.versions})
        for family in families:
            seen: dict[str, list[int | None]] = {}
            for r in members:
                for v in r.versions.get(family, []):
                    seen.setdefault(v, []).append(r.rank)
            if len(seen) > 1:
                parts = "; ".join(f"{v} on rank(s) {', '.join(map(str, rs))}"
                                  for v, rs in sorted(seen.items()))
                out.append(Finding(severity="error", rule="libs_ranks_disagree",
                                   message=f"ranks of job {job or '(no id)'} loaded different "
                                           f"{family} versions: {parts}"))
    return out


def collect_libs(pids: list[int], pattern: str | None, job: str | None,
                 proc: Path = Path("/proc")) -> ToolResult:
    invocation = f"libs pids={pids} pattern={pattern!r} job={job!r}"
    procs, notes = find_processes(pids or None, pattern, job, proc, self_pid=os.getpid())
    if not procs:
        return ToolResult.unavailable(
            "libs", invocation, "no rank of a distributed job found here (a process with RANK "
            "and LOCAL_RANK in its environment)" + (f": {'; '.join(notes)[:300]}"
                                                    if notes else ""), notes=notes)
    ranks = [rank_libs(tp.pid, tp.rank, tp.job, *read_rank(tp.pid, proc)) for tp in procs]
    summary: dict[str, list[str]] = {}
    for r in ranks:
        for family, vs in r.versions.items():
            summary.setdefault(family, [])
            summary[family] += [v for v in vs if v not in summary[family]]
    status = "success" if any(r.error is None for r in ranks) else "error"
    return ToolResult(tool="libs", status=status, invocation=invocation,
                      data={"ranks": [r.model_dump() for r in ranks], "versions": summary,
                            "notes": notes},
                      findings=findings(ranks),
                      error=None if status == "success" else "; ".join(
                          r.error or "" for r in ranks)[:500])
