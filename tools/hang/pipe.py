"""Ask a rank for its Flight Recorder dump through ProcessGroupNCCL's debug pipe.

With `TORCH_NCCL_DEBUG_INFO_PIPE_FILE=<stem>` and a trace buffer
(`TORCH_NCCL_TRACE_BUFFER_SIZE` / `TORCH_FR_BUFFER_SIZE` > 0), each rank makes a FIFO
`<stem><rank>.pipe` and polls it; anything written to it makes the rank dump its Flight
Recorder to `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>` (default `/tmp/nccl_trace_rank_`;
`TORCH_FR_DUMP_TEMP_FILE` in newer torch) - torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp
(`DumpPipe`) and FlightRecorder.cpp (`DebugInfoWriter`). Paths are read inside the process's
own mount namespace (/proc/PID/root), so containers work from the host.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path, PurePosixPath

from tools.hang.procs import TrainingProcess

DEFAULT_TEMP_FILE = "/tmp/nccl_trace_rank_"
MAX_DUMP_BYTES = 64 * 2**20


def _inside(pid: int, path: str, proc: Path) -> Path | None:
    """`path` as the process sees it; None for a relative path or one with '..'."""
    p = PurePosixPath(path)
    if not p.is_absolute() or ".." in p.parts:
        return None
    return proc / str(pid) / "root" / p.relative_to("/")


def pipe_paths(tp: TrainingProcess, proc: Path = Path("/proc")) -> tuple[Path, Path] | str:
    """(the rank's FIFO, the file its dump goes to), or why the rank has none."""
    stem = tp.env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
    size = tp.env.get("TORCH_FR_BUFFER_SIZE") or tp.env.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
    if not stem:
        return ("no TORCH_NCCL_DEBUG_INFO_PIPE_FILE in its environment (set it, with "
                "TORCH_NCCL_TRACE_BUFFER_SIZE=2000, to ask a live rank for its Flight Recorder)")
    if not size or not size.isdigit() or int(size) <= 0:
        return "its Flight Recorder buffer is off (TORCH_NCCL_TRACE_BUFFER_SIZE is 0 or unset)"
    if tp.rank is None:
        return "its rank is unknown"
    temp = (tp.env.get("TORCH_FR_DUMP_TEMP_FILE") or tp.env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
            or DEFAULT_TEMP_FILE)
    fifo = _inside(tp.pid, f"{stem}{tp.rank}.pipe", proc)
    out = _inside(tp.pid, f"{temp}{tp.rank}", proc)
    if fifo is None or out is None:
        return "its pipe or dump path is not an absolute path without '..'; not used"
    return fifo, out


def request_dump(tp: TrainingProcess, timeout_s: float = 5.0,
                 proc: Path = Path("/proc")) -> tuple[bytes | None, str | None]:
    """Write to the rank's pipe and wait for a fresh dump: (its bytes, None) or (None, why)."""
    paths = pipe_paths(tp, proc)
    if isinstance(paths, str):
        return None, paths
    fifo, out = paths
    try:
        if not stat.S_ISFIFO(fifo.lstat().st_mode):
            return None, f"{fifo.name} is not a named pipe; not written to"
        before = out.stat().st_mtime_ns if out.exists() else None
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return None, f"nobody reads {fifo.name} (the rank's process group is gone?)"
        return None, f"cannot open {fifo.name}: {exc.strerror}"
    try:
        os.write(fd, b"1")
    finally:
        os.close(fd)
    deadline = time.monotonic() + timeout_s
    last_size = -1
    while time.monotonic() < deadline:
        try:
            st = out.stat()
        except OSError:
            st = None
        if st is not None and st.st_mtime_ns != before and st.st_size > 0:
            if st.st_size == last_size:  # written and settled
                with out.open("rb") as fh:
                    return fh.read(MAX_DUMP_BYTES + 1)[:MAX_DUMP_BYTES], None
            last_size = st.st_size
        time.sleep(0.1)
    return None, (f"no dump at {out.name} within {timeout_s:g} s of writing to its pipe (the "
                  "rank's watchdog may be stuck too)")
