"""Finding the few interesting lines in a huge log, at close to disk speed.

A `PatternSet` holds every trigger (the analyzer's own extractors and every
card signature). With Hyperscan (x86-64 Linux) one pass over each chunk finds
all of them at several GB/s; without it, one combined Python regex does the
same more slowly. Only the lines that matched (and, for a few triggers, the
line after them) are decoded and handed on, with their 1-based line numbers.

A *tally* trigger is for lines that are only counted (NCCL's per-channel transport
lines: hundreds of thousands in a big job's log). It stays out of that per-line path:
Hyperscan only says whether a block has such lines (one match per block), then a C-level
`findall` counts the values of the pattern's one group and a `Tally` with the counts and
the last such line is handed on.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_hs: Any
try:  # optional accelerator
    import hyperscan as _hs
except ImportError:  # pragma: no cover - depends on the platform
    _hs = None

MAX_LINE = 1 << 20  # a "line" longer than this is cut into pieces
MAX_TEXT = 4000  # characters of a line kept as evidence


@dataclass(frozen=True, slots=True)
class Trigger:
    id: int
    pattern: str
    ignore_case: bool = False
    after: int = 0  # also hand on this many following lines
    tally: bool = False  # only count matches by the pattern's one group; see Tally


@dataclass(frozen=True, slots=True)
class Hit:
    line: int  # 1-based
    text: str
    triggers: frozenset[int]
    context: bool = False  # handed on only as the line after a trigger


@dataclass(slots=True)
class Tally:
    """What one tally trigger counted in one block: values of its one group, and the
    last line it matched (1-based number and text)."""

    trigger: int
    counts: Counter[str] = field(default_factory=Counter)
    last_line: int = 0
    last_text: str = ""


@dataclass(slots=True)
class LineCount:
    """Lines seen so far in one stream (kept per scan, so scans can run in parallel)."""

    lines: int = 0


class PatternSet:
    """Compiled triggers; `scan` turns chunks of one source into hits, in order.

    With `cache_dir`, the compiled Hyperscan database is kept there, keyed by a hash of the
    triggers and the Hyperscan version (compiling takes ~0.3 s; loading it, nothing)."""

    def __init__(self, triggers: Iterable[Trigger], cache_dir: Path | None = None) -> None:
        self.triggers = list(triggers)
        self._tallies = [(t.id, re.compile(t.pattern.encode(), _re_flags(t)))
                         for t in self.triggers if t.tally]
        #: with Hyperscan a tally trigger reports at most one match per block (SINGLEMATCH):
        #: only blocks that have its lines pay for the counting pass
        self._tally_ids = frozenset(t.id for t in self.triggers if t.tally)
        self._by_id = {t.id: t for t in self.triggers}
        self._after = {t.id: t.after for t in self.triggers if t.after}
        self._db: Any = None
        self._local = threading.local()  # one Hyperscan scratch per thread
        self._slow: list[Trigger] = []
        if _hs is not None:
            self._db, self._slow = _cached_hyperscan(self.triggers, cache_dir)
        else:
            self._slow = list(self.triggers)
        #: tallies counted in every block (no Hyperscan, or it could not take the pattern)
        self._always_tally = frozenset(t.id for t in self._slow if t.tally)
        self._slow = [t for t in self._slow if not t.tally]
        self._slow_re = [(t.id, re.compile(t.pattern.encode(), _re_flags(t))) for t in self._slow]
        self._slow_any = (
            re.compile(b"|".join(f"(?:{t.pattern})".encode() for t in self._slow), re.MULTILINE)
            if self._slow and all(not t.ignore_case for t in self._slow)
            else None
        )

    @property
    def engine(self) -> str:
        return "hyperscan" if self._db is not None else "re"

    def scan(self, chunks: Iterable[bytes], counter: LineCount | None = None
             ) -> Iterator[Hit | Tally]:
        """Hits in order (each block's tallies after its hits). Chunks are scanned in
        place; only a line split across two chunks is copied. `counter.lines` holds the
        number of lines seen when done."""
        carry = b""
        count = counter if counter is not None else LineCount()
        for chunk in chunks:
            lo = 0
            if carry:
                first = chunk.find(b"\n")
                if first < 0 and len(carry) + len(chunk) < MAX_LINE:
                    carry += chunk
                    continue
                lo = len(chunk) if first < 0 else first + 1
                joined = carry + chunk[:lo]
                carry = b""
                yield from self._scan_block(joined, 0, len(joined), count)
            cut = chunk.rfind(b"\n", lo) + 1
            if cut <= lo:  # no newline in the rest of this chunk
                carry = chunk[lo:]
                if len(carry) >= MAX_LINE:
                    yield from self._scan_block(carry, 0, len(carry), count)
                    carry = b""
                continue
            yield from self._scan_block(chunk, lo, cut, count)
            carry = chunk[cut:]
        if carry:
            yield from self._scan_block(carry, 0, len(carry), count)

    def _matches(self, buf: bytes, lo: int, hi: int) -> tuple[dict[int, set[int]], set[int]]:
        """Map line-start offset -> ids of the triggers that matched on that line; and the
        tally triggers that matched somewhere in the block."""
        found: dict[int, set[int]] = {}
        tallied: set[int] = set(self._always_tally)
        tally_ids = self._tally_ids

        def add(tid: int, end: int) -> None:
            found.setdefault(_line_start(buf, lo, end - 1) if end > lo else lo, set()).add(tid)

        if self._db is not None:

            def on_match(tid: int, _frm: int, to: int, _flags: int, _ctx: object) -> None:
                if tid in tally_ids:
                    tallied.add(tid)
                else:
                    add(tid, lo + to)

            scratch = getattr(self._local, "scratch", None)
            if scratch is None:
                scratch = self._local.scratch = _hs.Scratch(self._db)
            self._db.scan(memoryview(buf)[lo:hi], match_event_handler=on_match, scratch=scratch)
        if self._slow_re:
            if self._slow_any is not None:
                starts = {_line_start(buf, lo, m.start())
                          for m in self._slow_any.finditer(buf, lo, hi)}
                for start in starts:
                    end = buf.find(b"\n", start, hi)
                    line = buf[start : end if end >= 0 else hi]
                    for tid, rx in self._slow_re:
                        if rx.search(line):
                            found.setdefault(start, set()).add(tid)
            else:
                for tid, rx in self._slow_re:
                    for m in rx.finditer(buf, lo, hi):
                        add(tid, m.end() if m.end() > m.start() else m.start() + 1)
        return found, tallied

    def _tally(self, buf: bytes, lo: int, hi: int, first_line: int,
               which: set[int]) -> Iterator[Tally]:
        for tid, rx in self._tallies:
            if tid not in which:
                continue
            values = rx.findall(buf, lo, hi)  # the one group's values, collected in C
            if not values:
                continue
            tally = Tally(tid, Counter({k.decode("utf-8", "replace"): n
                                        for k, n in Counter(values).items()}))
            last = _last_match(rx, buf, lo, hi)
            start = _line_start(buf, lo, last)
            end = buf.find(b"\n", last, hi)
            tally.last_line = first_line + buf.count(b"\n", lo, start)
            tally.last_text = buf[start : min(end if end >= 0 else hi,
                                              start + MAX_TEXT)].decode("utf-8", "replace")
            yield tally

    def _scan_block(self, buf: bytes, lo: int, hi: int, count: LineCount
                    ) -> Iterator[Hit | Tally]:
        found, tallied = self._matches(buf, lo, hi)
        tallies = list(self._tally(buf, lo, hi, count.lines + 1, tallied)) if tallied else []
        wanted: dict[int, tuple[frozenset[int], bool]] = {}
        for start, ids in found.items():
            wanted[start] = (frozenset(ids), False)
            extra = max((self._after.get(i, 0) for i in ids), default=0)
            pos = start
            for _ in range(extra):
                nxt = buf.find(b"\n", pos, hi)
                if nxt < 0 or nxt + 1 >= hi:
                    break
                pos = nxt + 1
                wanted.setdefault(pos, (frozenset(), True))
        last_pos, line = lo, count.lines + 1
        for start in sorted(wanted):
            line += buf.count(b"\n", last_pos, start)
            last_pos = start
            end = buf.find(b"\n", start, hi)
            raw = buf[start : min(end if end >= 0 else hi, start + MAX_TEXT * 4)]
            hit_ids, is_context = wanted[start]
            yield Hit(line, raw.decode("utf-8", "replace"), hit_ids, is_context)
        newlines = buf.count(b"\n", last_pos, hi)
        count.lines = line - 1 + newlines + (0 if buf.endswith(b"\n", lo, hi) else 1)
        yield from tallies


def _line_start(buf: bytes, lo: int, pos: int) -> int:
    """Offset where the line holding `pos` begins, not before the block start `lo`."""
    return max(buf.rfind(b"\n", lo, pos) + 1, lo)


def _last_match(rx: re.Pattern[bytes], buf: bytes, lo: int, hi: int) -> int:
    """Start of the last match of `rx` in buf[lo:hi] (one is known to exist), searching
    back from the end in growing windows that start at a line boundary."""
    window = 4096
    while True:
        start = max(lo, hi - window)
        if start > lo:
            start = _line_start(buf, lo, start)
        last = -1
        for m in rx.finditer(buf, start, hi):
            last = m.start()
        if last >= 0 or start == lo:
            return last
        window *= 8


def _cached_hyperscan(triggers: list[Trigger], cache_dir: Path | None
                      ) -> tuple[Any, list[Trigger]]:
    """`_compile_hyperscan`, through a file cache when `cache_dir` is given."""
    if cache_dir is None:
        return _compile_hyperscan(triggers)
    h = hashlib.sha256(f"hyperscan={getattr(_hs, '__version__', '?')}\n".encode())
    for t in triggers:
        h.update(f"{t.id}\0{t.pattern}\0{t.ignore_case}\0{_flags(t)}\n".encode())
    path = Path(cache_dir) / f"hyperscan-{h.hexdigest()[:24]}.db"
    slow_path = path.with_suffix(".slow")
    try:
        slow_ids = {int(x) for x in slow_path.read_text().split()} if slow_path.exists() else set()
        db = _hs.loadb(path.read_bytes(), _hs.HS_MODE_BLOCK)
        return db, [t for t in triggers if t.id in slow_ids]
    except (OSError, ValueError, _hs.error):
        pass  # absent or unreadable: compile and (try to) store
    db, slow = _compile_hyperscan(triggers)
    if db is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(_hs.dumpb(db))
            slow_path.write_text(" ".join(str(t.id) for t in slow))
            tmp.replace(path)
        except OSError:
            pass  # a read-only cache dir: compile on every start instead
    return db, slow


def _compile_hyperscan(triggers: list[Trigger]) -> tuple[Any, list[Trigger]]:
    """Compile what Hyperscan accepts; the rest falls back to Python regexes."""
    try:
        return _hs_database(triggers), []
    except Exception:  # noqa: BLE001 - hyperscan.error: some construct is unsupported
        pass
    good, slow = [], []
    for t in triggers:
        try:
            _hs_database([t])
            good.append(t)
        except Exception:  # noqa: BLE001
            slow.append(t)
    return (_hs_database(good) if good else None), slow


def _hs_database(triggers: list[Trigger]) -> object:
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(
        expressions=[t.pattern.encode() for t in triggers],
        ids=[t.id for t in triggers],
        elements=len(triggers),
        flags=[_flags(t) for t in triggers],
    )
    return db


def _flags(t: Trigger) -> int:
    flags: int = _hs.HS_FLAG_MULTILINE
    if t.tally:
        flags |= _hs.HS_FLAG_SINGLEMATCH
    if t.ignore_case:
        flags |= _hs.HS_FLAG_CASELESS
    if any(ord(c) > 127 for c in t.pattern):
        flags |= _hs.HS_FLAG_UTF8
    return flags


def _re_flags(t: Trigger) -> int:
    return re.MULTILINE | (re.IGNORECASE if t.ignore_case else 0)
