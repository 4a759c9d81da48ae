"""Ask a rank for its Flight Recorder dump through ProcessGroupNCCL's debug pipe.

With `TORCH_NCCL_DEBUG_INFO_PIPE_FILE=<stem>` and a trace buffer
(`TORCH_NCCL_TRACE_BUFFER_SIZE` / `TORCH_FR_BUFFER_SIZE` > 0), each rank makes a FIFO
`<stem><rank>.pipe` and polls it; anything written to it makes the rank dump its Flight
Recorder to `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>` (default `/tmp/nccl_trace_rank_`;
`TORCH_FR_DUMP_TEMP_FILE` in newer torch) - torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp
(`DumpPipe`) and FlightRecorder.cpp (`DebugInfoWriter`). From pytorch/pytorch's
ProcessGroupNCCL.hpp (`struct DumpPipe`, main as stored in the reference index):

    std::string filename = c10::str(fileStem, rank, ".pipe");
    ...
        mkfifo(filename.c_str(), 0666) != -1,
    ...
    fd_ = open(filename.c_str(), O_RDONLY | O_NONBLOCK);
    ...
    ssize_t bytesRead = read(fd_, &buf, 128);
    return bytesRead > 0;

So a rank whose watchdog does not poll leaves its pipe unread, and a full pipe refuses our
byte (O_NONBLOCK): that rank loses its own dump, no other.

Both paths are the rank's to choose, so they are opened only inside the rank's own root
(`/proc/PID/root`), never through a symbolic link, and only when the rank's uid owns them; the
reading is done by a short-lived child (`tools.hang.reader`) that holds the rank's credentials
when the agent runs as root, with a deadline and a byte budget.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tools.hang.procs import TrainingProcess

DEFAULT_TEMP_FILE = "/tmp/nccl_trace_rank_"
#: one rank's dump at most (a 2000-entry Flight Recorder is a few MB)
MAX_DUMP_BYTES = 8 * 2**20
#: the reader child's own header line, at most
_HEAD_BYTES = 4096
_READER = Path(__file__).with_name("reader.py")
_SOURCE: list[str] = []


def _reader_source() -> str:
    if not _SOURCE:
        _SOURCE.append(_READER.read_text())
    return _SOURCE[0]


@dataclass(frozen=True)
class DumpPaths:
    """The rank's FIFO and dump file, as absolute paths inside its own root."""

    fifo: str
    dump: str


def _inside(path: str) -> str | None:
    """`path` when it is absolute and has no '..' (the rank's view); else None."""
    p = PurePosixPath(path)
    if not p.is_absolute() or ".." in p.parts:
        return None
    return str(p)


def pipe_paths(tp: TrainingProcess) -> DumpPaths | str:
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
    fifo, out = _inside(f"{stem}{tp.rank}.pipe"), _inside(f"{temp}{tp.rank}")
    if fifo is None or out is None:
        return "its pipe or dump path is not an absolute path without '..'; not used"
    return DumpPaths(fifo, out)


def request_dump(tp: TrainingProcess, timeout_s: float = 5.0, max_bytes: int = MAX_DUMP_BYTES,
                 proc: Path = Path("/proc"), openat2: bool = True,
                 wrapper: Sequence[str] = ()) -> tuple[bytes | None, str | None]:
    """Write to the rank's pipe and wait for a fresh dump: (its bytes, None) or (None, why).
    Never longer than `timeout_s` (1.5 s at least), never more than `max_bytes`. `openat2`
    False takes the path walk older kernels get; `wrapper` runs the reader under a command
    (tests: `setpriv` without the capabilities to change user)."""
    paths = pipe_paths(tp)
    if isinstance(paths, str):
        return None, paths
    if tp.uid is None or tp.gid is None:
        return None, "its owner is unknown (no /proc/PID/status); its files are not read"
    if max_bytes <= 0:
        return None, "the sample's Flight Recorder byte budget is spent; not asked"
    kill_at = time.monotonic() + max(timeout_s, 1.5)
    try:
        root_fd = os.open(proc / str(tp.pid) / "root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return None, f"cannot enter the rank's root directory: {exc.strerror}"
    args = {"root_fd": root_fd, "uid": tp.uid, "gid": tp.gid, "groups": tp.groups[:64],
            "fifo": paths.fifo, "dump": paths.dump,
            # one clock for both (CLOCK_MONOTONIC is system-wide): the reader stops half a
            # second before it would be killed, however long its interpreter took to start
            "deadline": kill_at - 0.5,
            "max_bytes": max_bytes, "openat2": openat2}
    try:
        child = subprocess.Popen(  # fixed argv, no shell, nothing of the agent's environment
            [*wrapper, sys.executable, "-I", "-S", "-c", _reader_source(), json.dumps(args)],
            pass_fds=(root_fd,), env={}, cwd="/", stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError as exc:
        return None, f"cannot start the dump reader: {exc.strerror or exc}"
    finally:
        os.close(root_fd)
    try:
        raw, why = _read_bounded(child, kill_at, max_bytes + _HEAD_BYTES)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    if why is not None:
        return None, why
    return parse_reply(raw, max_bytes)


def _read_bounded(child: subprocess.Popen[bytes], deadline: float,
                  limit: int) -> tuple[bytes, str | None]:
    """What the child wrote, until it closes stdout; at most `limit` bytes and until
    `deadline` (then it is killed)."""
    assert child.stdout is not None
    fd, chunks, got = child.stdout.fileno(), list[bytes](), 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", "the dump reader ran out of time; killed"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, min(1 << 20, limit + 1 - got))
        if not chunk:
            return b"".join(chunks), None
        chunks.append(chunk)
        got += len(chunk)
        if got > limit:
            return b"", "the dump reader sent more than its budget; dropped"


def parse_reply(raw: bytes, max_bytes: int) -> tuple[bytes | None, str | None]:
    """The reader's reply: one JSON line, then the dump's bytes."""
    head, sep, data = raw.partition(b"\n")
    try:
        meta = json.loads(head[:_HEAD_BYTES]) if sep else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        return None, "the dump reader gave no answer"
    if not meta.get("ok"):
        return None, str(meta.get("note") or "no dump")[:400]
    if meta.get("size") != len(data) or len(data) > max_bytes:
        return None, "the dump reader's answer was cut short; dropped"
    return data, None
