"""Python stacks of a running process with py-spy (`py-spy dump --pid P --json`)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tools.hang.model import Frame, ThreadStack
from tools.runner import CommandRunner, SubprocessRunner

MAX_THREADS = 64
MAX_FRAMES = 64


def py_spy() -> str | None:
    """The py-spy executable: on PATH, or beside this Python (a venv's bin)."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else None


def parse_dump_json(text: str) -> list[ThreadStack]:
    """py-spy's JSON: a list of threads, each with `thread_name`, `active` and `frames`
    (`name`, `filename`, `line`), innermost frame first."""
    raw: Any = json.loads(text)
    if not isinstance(raw, list):
        raise ValueError("py-spy did not print a list of threads")
    threads = []
    for t in raw[:MAX_THREADS]:
        if not isinstance(t, dict):
            continue
        frames = [Frame(function=str(f.get("name", "?"))[:200],
                        file=str(f.get("filename", "?"))[:500],
                        line=f.get("line") if isinstance(f.get("line"), int) else None)
                  for f in (t.get("frames") or [])[:MAX_FRAMES] if isinstance(f, dict)]
        threads.append(ThreadStack(name=str(t.get("thread_name") or t.get("thread_id", "?")),
                                   active=bool(t.get("active")), frames=frames))
    return threads


def dump_stacks(pid: int, native: bool = False, timeout_s: float = 10.0,
                run: CommandRunner | None = None) -> tuple[list[ThreadStack], str | None]:
    """The process's threads, or an empty list and why not (py-spy missing, no permission to
    ptrace the process, timed out)."""
    exe = py_spy()
    if exe is None:
        return [], ("py-spy is not installed on this node (pip install py-spy); it reads a "
                    "process's Python stacks")
    argv = [exe, "dump", "--pid", str(pid), "--json", *(["--native"] if native else [])]
    out = (run or SubprocessRunner())(argv, timeout=timeout_s)
    if not out.ok:
        why = out.error or (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
        if "ermission" in why or "ptrace" in why.lower():
            why += (" (py-spy needs root or CAP_SYS_PTRACE to read another process; in a "
                    "container add --cap-add SYS_PTRACE)")
        return [], f"py-spy dump --pid {pid}: {why[:400]}"
    try:
        return parse_dump_json(out.stdout), None
    except (ValueError, TypeError) as exc:
        return [], f"py-spy dump --pid {pid}: unreadable output ({exc})"
