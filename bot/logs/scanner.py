"""Finding the few interesting lines in a huge log, at close to disk speed.

A `PatternSet` holds every trigger (the analyzer's own extractors and every
card signature). With Hyperscan (x86-64 Linux) one pass over each chunk finds
all of them at several GB/s; without it, one combined Python regex does the
same more slowly. Only the lines that matched (and, for a few triggers, the
line after them) are decoded and handed on, with their 1-based line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class Hit:
    line: int  # 1-based
    text: str
    triggers: frozenset[int]
    context: bool = False  # handed on only as the line after a trigger


class PatternSet:
    """Compiled triggers; `scan` turns chunks of one source into hits, in order."""

    def __init__(self, triggers: Iterable[Trigger]) -> None:
        self.triggers = list(triggers)
        self._by_id = {t.id: t for t in self.triggers}
        self._after = {t.id: t.after for t in self.triggers if t.after}
        self._db = None
        self._slow: list[Trigger] = []
        if _hs is not None:
            self._db, self._slow = _compile_hyperscan(self.triggers)
        else:
            self._slow = list(self.triggers)
        self._slow_re = [(t.id, re.compile(t.pattern.encode(), _re_flags(t))) for t in self._slow]
        self._slow_any = (
            re.compile(b"|".join(f"(?:{t.pattern})".encode() for t in self._slow), re.MULTILINE)
            if self._slow and all(not t.ignore_case for t in self._slow)
            else None
        )

    @property
    def engine(self) -> str:
        return "hyperscan" if self._db is not None else "re"

    def scan(self, chunks: Iterable[bytes]) -> Iterator[Hit]:
        carry = b""
        line_base = 0
        for chunk in chunks:
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                if len(data) < MAX_LINE:
                    carry = data
                    continue
                cut = len(data)
            carry = data[cut:]
            block = data[:cut]
            yield from self._scan_block(block, line_base)
            line_base += block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        if carry:
            yield from self._scan_block(carry, line_base)

    def _matches(self, block: bytes) -> dict[int, set[int]]:
        """Map line-start offset -> ids of the triggers that matched on that line."""
        found: dict[int, set[int]] = {}

        def add(tid: int, end: int) -> None:
            start = block.rfind(b"\n", 0, max(end - 1, 0)) + 1 if end else 0
            found.setdefault(start, set()).add(tid)

        if self._db is not None:

            def on_match(tid: int, _frm: int, to: int, _flags: int, _ctx: object) -> None:
                add(tid, to)

            self._db.scan(block, match_event_handler=on_match)
        if self._slow_re:
            if self._slow_any is not None:
                starts = {
                    block.rfind(b"\n", 0, m.start()) + 1 for m in self._slow_any.finditer(block)
                }
                for start in starts:
                    end = block.find(b"\n", start)
                    line = block[start : end if end >= 0 else len(block)]
                    for tid, rx in self._slow_re:
                        if rx.search(line):
                            found.setdefault(start, set()).add(tid)
            else:
                for tid, rx in self._slow_re:
                    for m in rx.finditer(block):
                        add(tid, m.end() if m.end() > m.start() else m.start() + 1)
        return found

    def _scan_block(self, block: bytes, line_base: int) -> Iterator[Hit]:
        found = self._matches(block)
        if not found:
            return
        wanted: dict[int, tuple[frozenset[int], bool]] = {}
        for start, ids in found.items():
            wanted[start] = (frozenset(ids), False)
            extra = max((self._after.get(i, 0) for i in ids), default=0)
            pos = start
            for _ in range(extra):
                nxt = block.find(b"\n", pos)
                if nxt < 0 or nxt + 1 >= len(block):
                    break
                pos = nxt + 1
                wanted.setdefault(pos, (frozenset(), True))
        last_pos, last_line = 0, line_base + 1
        for start in sorted(wanted):
            last_line += block.count(b"\n", last_pos, start)
            last_pos = start
            end = block.find(b"\n", start)
            raw = block[start : end if end >= 0 else len(block)]
            text = raw[: MAX_TEXT * 4].decode("utf-8", "replace")
            ids, is_context = wanted[start]
            yield Hit(last_line, text, ids, is_context)


def _compile_hyperscan(triggers: list[Trigger]) -> tuple[object | None, list[Trigger]]:
    """Compile what Hyperscan accepts; the rest falls back to Python regexes."""
    good, slow = [], []
    for t in triggers:
        try:
            db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
            db.compile(expressions=[t.pattern.encode()], ids=[t.id], elements=1, flags=[_flags(t)])
            good.append(t)
        except Exception:  # noqa: BLE001 - hyperscan.error: unsupported construct
            slow.append(t)
    if not good:
        return None, slow
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(
        expressions=[t.pattern.encode() for t in good],
        ids=[t.id for t in good],
        elements=len(good),
        flags=[_flags(t) for t in good],
    )
    return db, slow


def _flags(t: Trigger) -> int:
    flags = _hs.HS_FLAG_MULTILINE
    if t.ignore_case:
        flags |= _hs.HS_FLAG_CASELESS
    if any(ord(c) > 127 for c in t.pattern):
        flags |= _hs.HS_FLAG_UTF8
    return flags


def _re_flags(t: Trigger) -> int:
    return re.MULTILINE | (re.IGNORECASE if t.ignore_case else 0)
