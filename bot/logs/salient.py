"""Salient lines: the distinct error-ish lines of a log, normalised, bounded (pure).

They are what a log is compared on against past incidents (`bot.diagnosis.nearest`). The
analyzer collects them while it scans (one more scanner trigger, `SALIENT_PATTERN`); the
corpus is reduced with `salient_lines`, so both sides pick and normalise lines alike.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from bot.logs.extract import BENIGN_NCCL_WARN
from bot.logs.prefixes import clean, parse_line

#: A line worth comparing: the same expression feeds the analyzer's scanner (Hyperscan) and
#: the indexing of the corpus (Python `re`), so both sides pick the same lines.
SALIENT_PATTERN = (
    r"error|warn|fail|exception|traceback|timed? ?out|timeout|refused|abort|killed|"
    r"signal|denied|unable|cannot|can't|invalid|mismatch|unhandled|xid|segmentation|"
    r"core dumped|out of memory|\boom\b|no such|not found|unreachable|reset by peer|"
    r"closed|hang|stuck|exit ?code|exited|terminat|NCCL WARN|NET/[A-Za-z/]+ ?:|Using network|NVLS|"
    r"P2P is|Bootstrap ?:|NCCL_[A-Z_]+ set|Duplicate GPU|bus error|unrecognized|"
    r"watchdog|desync|no device|deadlock|not supported|exhausted"
)
SALIENT = re.compile(SALIENT_PATTERN, re.IGNORECASE)

#: Lines every collective timeout prints, whatever its cause (the watchdog's report, its
#: teardown, torchrun's failure summary). They are the analyzer's structured evidence (ranks,
#: sequence numbers, who failed first); for telling causes apart by resemblance they carry
#: nothing, so they are left out of the salient lines.
GENERIC = re.compile(
    r"Watchdog caught collective operation timeout|detected by watchdog at work|"
    r"Timeout at NCCL work|Some NCCL operations have failed or timed out|"
    r"To avoid data inconsistency|taking the entire process down|"
    r"Stack trace of the failed collective|Process group watchdog thread terminated|"
    r"terminate called after throwing an instance of|ChildFailedError|"
    r"Root Cause \(first observed failure\)|^\s*(?:exitcode|error_file|traceback)\s*:|"
    r"Traceback \(most recent call last\)|Sending process \d+ closing signal|"
    r"failed \(exitcode: -?\d+\) local_rank",
    re.IGNORECASE,
)

#: A salient line that reports a failure (not just which transport or interface was used).
ERRORISH = re.compile(
    r"error|fail|exception|traceback|timed? ?out|timeout|refused|abort|killed|denied|unable|"
    r"cannot|can't|invalid|mismatch|unhandled|xid|segmentation|core dumped|out of memory|"
    r"\boom\b|no such|unreachable|reset by peer|hang|stuck|exited|terminat|duplicate gpu|"
    r"bus error|not supported|exhausted|deadlock|desync",
    re.IGNORECASE,
)

#: Lines that print settings, not events: a failure word in them is a setting's name or value
#: ("rdzv_configs : {'timeout': 900}", "'truncation': 'error'", "signals_to_handle :
#: SIGTERM,SIGINT"). torchrun's launch-config table, one "name : value" per line:
#: `"  rdzv_configs             : %(rdzv_configs)s\n"`, `"  signals_to_handle        :
#: %(signals_to_handle)s\n"` (torch 2.13.0 torch/distributed/launcher/api.py:263,270); a
#: Python dict repr of a config (verl, Hydra/OmegaConf printouts begin "{'data': {...").
#: Matched on the message or its normalised form (lower case, spaces collapsed).
#: (A snake_case name, then a space before the colon: "init.cu : ... failed" from NVSHMEM and
#: "RuntimeError: ..." are not settings.)
#: A shell's trace of the command it runs (`set -x`: "+ python3 -m verl.trainer.main_ppo ...
#: data.truncation=error") and a config dict printed one key a line ("'truncation': 'error',")
#: are settings too.
SETTINGS_LINE = re.compile(r"^\s*(?:[a-z]+(?:_[a-z]+)+\s+:\s|\{?\s*['\"][\w.-]+['\"]\s*:|"
                           r"\+{1,3} \S)")

#: Lines with a failure word that healthy runs print: NCCL's warnings that an optional
#: component is absent (`BENIGN_NCCL_WARN`), and c10d's TCPStore (libuv) shutdown note, at
#: INFO level on every clean exit: "[I1129 07:09:47.982820586 TCPStoreLibUvBackend.cpp:1354]
#: [c10d] uv_loop_close failed with:-16 errn:EBUSY desc:resource busy or locked" (torch
#: 2.13.0, knowledge/healthy/local-torchrun-gloo-2ranks-debug-detail.log).
#: nccl-tests' table heading names a column "error" (`"time", "algbw", "busbw", "error"`,
#: NVIDIA/nccl-tests v2.10.0 src/all_reduce.cu:13; "#wrong" in later releases).
NOT_FAILURE = re.compile(BENIGN_NCCL_WARN.pattern + r"|uv_loop_close failed|"
                         r"algbw\s+busbw\s+(?:error|#wrong)", re.IGNORECASE)


#: NCCL's warnings report a failure even without an error word ("NCCL WARN Message
#: truncated : received 256 bytes instead of 4").
_NCCL_WARN = re.compile(r"\bNCCL WARN\b", re.IGNORECASE)


def reports_failure(line: str) -> bool:
    """Whether a salient line (raw message or normalised) reports a failure: an error-ish
    word outside a settings printout and outside the warnings healthy runs print."""
    return (bool(ERRORISH.search(line) or _NCCL_WARN.search(line))
            and not SETTINGS_LINE.search(line) and not NOT_FAILURE.search(line))


#: At most this many distinct salient lines from the start and from the end of a log.
HEAD_LINES = 200
TAIL_LINES = 200

_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w.+@-]+/)+([\w.+@-]+)")
_NCCL_PREFIX = re.compile(r"^\S+:\d+:\d+ \[\d+\] ")
_RANKNUM = re.compile(r"\b(rank|localrank|local_rank)([\s=:]*)\d+", re.IGNORECASE)
_LINENO = re.compile(r"(\.(?:cpp|cc|cu|hpp|h|py|c)):\d+")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{8,}\b")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
_LONGNUM = re.compile(r"\d+(?:\.\d+)+|\d{4,}")
_HOSTLIKE = re.compile(r"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)+\b")


def normalise(body: str) -> str:
    """One line's message with what varies between jobs taken out."""
    text = _LINENO.sub(r"\1", _NCCL_PREFIX.sub("", body))
    text = _RANKNUM.sub(r"\1", text).lower()
    text = _PATH.sub(lambda m: " " + m.group(1) + " ", text)
    text = _HEX.sub(" ", text)
    text = _IPV4.sub(" ipaddr ", text)
    text = _LONGNUM.sub(" ", text)
    text = _HOSTLIKE.sub(lambda m: m.group(0) if m.group(0).count("-") == 1 else " ", text)
    return " ".join(text.split())


def body_key(body: str) -> str:
    """The normalised form of a salient line's message ("" for the lines every timeout
    prints, which are left out)."""
    return "" if GENERIC.search(body) else normalise(body)


def salient_key(raw_line: str) -> str | None:
    """The normalised form of a raw log line, or None when the line is not salient."""
    line = clean(raw_line)
    if not line or not SALIENT.search(line):
        return None
    return body_key(parse_line(line).body) or None


W = TypeVar("W")


@dataclass
class SalientLines(Generic[W]):
    """Distinct salient lines of a log, bounded: the first HEAD_LINES and the last TAIL_LINES."""

    #: normalised line -> where it was first seen (file, line number, raw text), if known
    head: dict[str, W | None] = field(default_factory=dict)
    tail: OrderedDict[str, W | None] = field(default_factory=OrderedDict)

    def add(self, key: str, where: W | None = None) -> None:
        if key in self.head:
            return
        if len(self.head) < HEAD_LINES:
            self.head[key] = where
            return
        self.tail[key] = self.tail.get(key, where)
        self.tail.move_to_end(key)
        if len(self.tail) > TAIL_LINES:
            self.tail.popitem(last=False)

    def lines(self) -> list[str]:
        return [*self.head, *self.tail]

    def reports_failure(self) -> bool:
        """Whether any kept line reports a failure (rather than only set-up information)."""
        return any(reports_failure(k) for k in (*self.head, *self.tail))

    def items(self) -> list[tuple[str, W | None]]:
        return [*self.head.items(), *self.tail.items()]


def salient_lines(lines: Iterable[str]) -> list[str]:
    acc: SalientLines[None] = SalientLines()
    for raw in lines:
        key = salient_key(raw)
        if key:
            acc.add(key)
    return acc.lines()
