"""Launcher prefixes and timestamps: who wrote a line and when (pure).

Launchers and loggers stack prefixes in front of what a rank printed:
Slurm `srun -l` (`0: `), pdsh/DeepSpeed (`node-1: `), Ray
(`(WorkerDict pid=123, ip=10.0.0.1) `), torchrun (`[rank3]:`, `[default0]:`),
glog (`E1120 03:59:01.123 1234 file.cc:10]`), ISO and Python-logging
timestamps, NCCL's own `host:pid:tid [dev] NCCL ...`. `parse_line` peels them
off in any order and keeps what they say about rank, host and time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

_SLURM = re.compile(r"(\d{1,6}): ")
_PDSH = re.compile(r"((?:[A-Za-z][A-Za-z0-9_.-]*\d[A-Za-z0-9_.-]*)|localhost): ")
_RAY = re.compile(r"\((\w+) pid=(\d+)(?:, ip=([0-9a-fA-F.:]+))?\)\s*")
_TORCHRUN = re.compile(r"\[(rank|default)(\d{1,6})\]:\s?")
_BRACKET_TS = re.compile(
    r"\[(\d{4})-(\d{2})-(\d{2})[ T_](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?[^\]]*\]\s*"
)
_ISO_TS = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:Z|[+-]\d{2}:?\d{2})?"
    r"(?:\s+-)?\s+"
)
_GLOG = re.compile(
    r"\[?([IWEF])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?: +\d+)?"
    r"(?: [\w./-]+:\d+)?\]\s*"
)
_VLLM = re.compile(
    r"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})"
    r"(?:\.\d+)? [\w./-]+:\d+\]\s*"
)
_NCCL_HOST = re.compile(r"([A-Za-z0-9][\w.-]*):(\d+):(\d+) \[(\d+)\] NCCL")
_RANK_IN_TEXT = re.compile(r"\[(?:[Rr]ank|PG \d+ Rank) (\d{1,6})\]")
_LEVEL = re.compile(r"\[(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\]\s*")


@dataclass(frozen=True, slots=True)
class LineInfo:
    """What the prefixes of one line tell: the message and who/when wrote it."""

    body: str
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    ts: float | None = None  # seconds since 1 Jan of the log's year (year ignored)
    tag: str | None = None  # e.g. the Ray actor name


def _ts(month: str, day: str, h: str, m: str, s: str, frac: str | None) -> float:
    secs = ((int(month) * 31 + int(day)) * 24 + int(h)) * 3600 + int(m) * 60 + int(s)
    return secs + (float("0." + frac) if frac else 0.0)


def clean(raw: str) -> str:
    """Strip ANSI colour codes, CR and trailing whitespace."""
    if "\x1b" in raw:
        raw = ANSI.sub("", raw)
    return raw.rstrip("\r\n \t")


def parse_line(raw: str) -> LineInfo:
    """Peel launcher prefixes and timestamps off one (already cleaned) line."""
    text = raw
    rank = local_rank = pid = None
    host = tag = None
    ts: float | None = None
    for _ in range(8):
        stripped = text.lstrip()
        m = _TORCHRUN.match(stripped)
        if m:
            if m.group(1) == "rank":
                rank = int(m.group(2))
            else:
                local_rank = int(m.group(2))
            text = stripped[m.end() :]
            continue
        m = _BRACKET_TS.match(stripped)
        if m:
            ts = _ts(*m.group(2, 3, 4, 5, 6, 7))
            text = stripped[m.end() :]
            continue
        m = _RAY.match(stripped)
        if m:
            tag, pid = m.group(1), int(m.group(2))
            host = m.group(3) or host
            text = stripped[m.end() :]
            continue
        m = _GLOG.match(stripped)
        if m:
            ts = _ts(*m.group(2, 3, 4, 5, 6, 7))
            text = stripped[m.end() :]
            continue
        m = _ISO_TS.match(stripped)
        if m:
            ts = _ts(*m.group(2, 3, 4, 5, 6, 7))
            text = stripped[m.end() :]
            continue
        m = _VLLM.match(stripped)
        if m:
            month, day, h, mi, sec = m.group(1, 2, 3, 4, 5)
            ts = _ts(month, day, h, mi, sec, None)
            text = stripped[m.end() :]
            continue
        m = _LEVEL.match(stripped)
        if m:
            text = stripped[m.end() :]
            continue
        m = _SLURM.match(text)
        if m and rank is None:
            rank = int(m.group(1))
            text = text[m.end() :]
            continue
        m = _PDSH.match(text)
        if m and not _NCCL_HOST.match(text):
            host = host or m.group(1)
            text = text[m.end() :]
            continue
        break
    m = _NCCL_HOST.search(text)
    if m:
        host = host or m.group(1)
        pid = pid or int(m.group(2))
    if rank is None:
        m = _RANK_IN_TEXT.search(text)
        if m:
            rank = int(m.group(1))
    return LineInfo(text.strip(), rank, local_rank, host, pid, ts, tag)
