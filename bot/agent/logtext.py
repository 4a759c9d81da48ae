"""Reading one line of an attached log by (file, line), for checking quoted evidence."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from itertools import islice

from bot.errors import NcclbotError

MAX_LINE_NO = 20_000_000


def line_reader(attachments: Mapping[str, str]) -> Callable[[str, int], str | None]:
    """A lookup `(file, 1-based line) -> text` over the attachments (and archive members)."""
    cache: dict[tuple[str, int], str | None] = {}

    def read(file: str, line: int) -> str | None:
        if not 1 <= line <= MAX_LINE_NO:
            return None
        key = (file, line)
        if key not in cache:
            cache[key] = _read(attachments, file, line)
        return cache[key]

    return read


def _read(attachments: Mapping[str, str], file: str, line: int) -> str | None:
    from bot.logs.sources import expand_inputs

    for path in dict.fromkeys(attachments.values()):
        try:
            sources = expand_inputs([path])
        except NcclbotError:
            continue
        for src in sources:
            if src.name != file:
                continue
            fh = src.opener()
            try:
                text = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline=None)
                found = next(islice(text, line - 1, line), None)
            finally:
                if src.closeable:
                    fh.close()
            return found.rstrip("\r\n") if found is not None else None
    return None
