"""Flight Recorder dumps are read in a child process that may die of them.

`read_dumps` starts one child (`python -m bot.logs.fr_sandbox`) for a batch of dumps, at
most two at once per process, and sends them one at a time over its stdin; the child
limits its own address space (RLIMIT_AS), CPU time (RLIMIT_CPU, per dump) and file writes
before it reads anything, parses each dump with `flight_recorder.parse_dump_here` and
answers one JSON line of bounded fields. The parent kills a child that takes longer than
the dump's wall timeout, rebuilds every field from that line with its type checked
(nothing of the child's is trusted), and starts a fresh child for the rest of the batch
when one died. So a dump that gets past every check still costs one bounded child, not
the bot: the dump becomes a `DumpError` note and the other dumps are still read.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bot.logs.flight_recorder import (
    MAX_DUMP_BYTES,
    MAX_ENTRIES,
    MAX_TEXT,
    DumpError,
    FrDump,
    FrEntry,
    parse_dump_here,
)


@dataclass(frozen=True)
class SandboxLimits:
    """What one child may use: address space above what it started with, CPU seconds per
    dump, and wall seconds per dump (a base plus a rate per MiB)."""

    #: a real 8.2 MiB dump (20,000 entries, 153-frame stacks) needs under 128 MiB
    memory_bytes: int = 384 * 2**20
    cpu_s_per_dump: int = 60
    wall_s: float = 30.0
    wall_s_per_mib: float = 6.0
    #: the most a child's answer for one dump may be (20,000 entries of bounded fields)
    answer_bytes: int = 64 * 2**20


#: dump readers running at once in this process: the bot's pod shares one memory limit
#: with its children, so more analyses at once wait for a reader instead
READERS = threading.BoundedSemaphore(2)


@dataclass(frozen=True)
class DumpInput:
    """A dump to read: its name (the rank is at its end) and how to get its bytes."""

    name: str
    read: Callable[[], bytes]


def read_dumps(inputs: Sequence[DumpInput], limits: SandboxLimits | None = None
               ) -> list[FrDump | DumpError]:
    """Each input's dump, or the `DumpError` that says why it was not used, in order."""
    if not inputs:
        return []
    with READERS:
        return _read(inputs, limits or SandboxLimits())


def _read(inputs: Sequence[DumpInput], limits: SandboxLimits) -> list[FrDump | DumpError]:
    out: list[FrDump | DumpError] = []
    child: _Child | None = None
    try:
        for item in inputs:
            try:
                data = item.read()
            except OSError as exc:
                out.append(DumpError(f"{item.name}: not readable ({exc.strerror or exc})"))
                continue
            if len(data) > MAX_DUMP_BYTES:
                out.append(DumpError(f"{item.name}: {len(data)} bytes, over the "
                                     f"{MAX_DUMP_BYTES} bytes a dump may have"))
                continue
            got: FrDump | DumpError | None = None
            for _ in range(2):  # a retired child hands the dump on to a fresh one
                if child is None or not child.alive():
                    if child is not None:
                        child.close()
                    try:
                        child = _Child(limits)
                    except OSError as exc:
                        got = DumpError(f"{item.name}: not read (the dump reader could not "
                                        f"start: {exc})")
                        break
                got = child.parse(item.name, data)
                if got is not None:
                    break
            out.append(got or DumpError(f"{item.name}: not read (no dump reader took it)"))
    finally:
        if child is not None:
            child.close()
    return out


class _Child:
    """One sandboxed reader process (ours: it is killed by its own pid only)."""

    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        # Not the bot's environment (its tokens): where `bot` is importable from, and PATH.
        root = str(Path(__file__).resolve().parents[2])
        env = {"PYTHONPATH": root, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "LC_ALL": "C.UTF-8"}
        self.proc = subprocess.Popen(
            [sys.executable, "-s", "-B", "-m", "bot.logs.fr_sandbox",
             str(limits.memory_bytes), str(limits.cpu_s_per_dump)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd="/")
        self.killed_for_time = False
        self.retired = False

    def alive(self) -> bool:
        return not self.retired and self.proc.poll() is None

    def _out_of_time(self) -> None:
        self.killed_for_time = True
        self._kill()

    def _kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass

    def parse(self, name: str, data: bytes) -> FrDump | DumpError | None:
        """The dump, why not, or None when this child retired before it (ask another)."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        wall = self.limits.wall_s + self.limits.wall_s_per_mib * len(data) / 2**20
        timer = threading.Timer(wall, self._out_of_time)
        timer.daemon = True
        timer.start()
        try:
            stdin.write(json.dumps({"name": name[:500], "size": len(data)}).encode() + b"\n")
            stdin.write(data)
            stdin.flush()
            line = stdout.readline(self.limits.answer_bytes)
        except OSError:  # the child died while we wrote (a broken pipe)
            line = b""
        finally:
            timer.cancel()
        if not line.endswith(b"\n"):
            return DumpError(f"{name}: not read: {self._why_dead(wall)}")
        try:
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("retired") is True:
                self.retired = True
                return None
            return _from_wire(msg, name)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._kill()
            return DumpError(f"{name}: not read (the dump reader answered nonsense: "
                             f"{type(exc).__name__})")

    def _why_dead(self, wall: float) -> str:
        if self.killed_for_time:
            what = f"it took longer than {wall:.0f} s"
        else:
            try:
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill()
                code = None
            what = {-9: "it was killed (out of memory?)",
                    -24: f"it took more than {self.limits.cpu_s_per_dump} s of CPU"}.get(
                        code or 0, f"the dump reader stopped (exit status {code})")
        return (f"{what}; a real Flight Recorder dump is read in seconds, so this file is "
                "crafted or broken: get a fresh dump from the rank")

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill()
            self.proc.wait()


def _str(value: object, limit: int = MAX_TEXT + 200) -> str:
    if not isinstance(value, str):
        raise TypeError("not text")
    return value[:limit]


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise TypeError("not a small integer")
    return value


def _entry(e: object) -> FrEntry:
    """One entry off the wire: pg, seq, op, sizes, state, where (and dtypes, created_ns)."""
    if not isinstance(e, list) or len(e) not in (6, 7, 8):
        raise TypeError("entry")
    return FrEntry(_str(e[0]), _int(e[1]), _str(e[2]), _str(e[3]), _str(e[4]),
                   _str(e[5], 1000), _str(e[6]) if len(e) >= 7 else "",
                   _int(e[7]) if len(e) == 8 and e[7] is not None else None)


def _from_wire(msg: object, name: str) -> FrDump | DumpError:
    """A child's answer, every field checked again: the child read hostile bytes."""
    if not isinstance(msg, dict):
        raise TypeError("not a mapping")
    if "error" in msg:
        return DumpError(_str(msg["error"], 600))
    d = msg["dump"]
    entries = d["entries"]
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        raise TypeError("entries")
    groups = d["groups"]
    if not isinstance(groups, dict) or len(groups) > 1000:
        raise TypeError("groups")
    notes = d["notes"]
    if not isinstance(notes, list) or len(notes) > 10:
        raise TypeError("notes")
    rank = d["rank"]
    return FrDump(
        name, None if rank is None else _int(rank), _str(d["version"]),
        [_entry(e) for e in entries],
        [_str(n, 600) for n in notes],
        {_str(k): [_int(r) for r in v[:100_000]] for k, v in groups.items()
         if isinstance(v, list)})


def _to_wire(dump: FrDump) -> dict[str, object]:
    return {"dump": {"rank": dump.rank, "version": dump.version, "notes": dump.notes,
                     "groups": dump.groups,
                     "entries": [[e.pg, e.seq, e.op, e.sizes, e.state, e.where, e.dtypes,
                                  e.created_ns]
                                 for e in dump.entries]}}


def _limit_self(memory_bytes: int) -> None:
    """Before reading anything: no more address space than now plus `memory_bytes`, no
    file written, no core dumped."""
    with open("/proc/self/status") as fh:
        vm = next((int(line.split()[1]) * 1024 for line in fh
                   if line.startswith("VmSize:")), 0)
    cap = vm + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


#: a child reads dumps until it has used this many dumps' worth of CPU, then a fresh one
#: takes over (a hard limit can be set once, not raised again)
CPU_DUMPS_PER_CHILD = 8


def _cpu_used() -> int:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return int(used.ru_utime + used.ru_stime) + 1


def _limit_cpu(seconds: int) -> bool:
    """At most `seconds` more of CPU for this dump (SIGXCPU ends the process); False when
    this child has too little left of its hard limit for another dump."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY:
        hard = _cpu_used() + seconds * CPU_DUMPS_PER_CHILD
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    soft = _cpu_used() + seconds
    if soft > hard:
        return False
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    return True


def _serve(inp: IO[bytes], out: IO[bytes], cpu_s: int) -> None:
    while header := inp.readline(4096):
        h = json.loads(header)
        name, size = str(h["name"])[:500], int(h["size"])
        data = inp.read(size)
        if not _limit_cpu(cpu_s):
            out.write(b'{"retired": true}\n')
            out.flush()
            return
        try:
            msg: dict[str, object] = _to_wire(parse_dump_here(data, name))
        except DumpError as exc:
            msg = {"error": str(exc)[:600]}
        except MemoryError:
            msg = {"error": f"{name}: not read: it needs more memory than a dump may use; a "
                            "real Flight Recorder dump fits, so this file is crafted or broken"}
        except Exception as exc:  # noqa: BLE001 - anything else a hostile file finds
            msg = {"error": f"{name}: not a readable Flight Recorder dump ({type(exc).__name__})"}
        del data
        out.write(json.dumps(msg).encode() + b"\n")
        out.flush()


def main(argv: Sequence[str]) -> int:
    """The child: `python -m bot.logs.fr_sandbox MEMORY_BYTES CPU_S_PER_DUMP`."""
    _limit_self(int(argv[0]))
    _serve(sys.stdin.buffer, sys.stdout.buffer, int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
