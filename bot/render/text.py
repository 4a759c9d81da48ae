"""Shortening text for a screen or a Slack block without cutting a word or a code span (pure).

`shorten` keeps whole sentences while they fit; when even the first does not, it cuts at
the last space that is outside a `code span` and ends with an ellipsis. `sentences` splits
text into sentences without breaking an IP address, a version, a file name or code
("172.17.0.2", "v2.18.3", "e.g.", `a. b`): a sentence ends at . ! ? 。！？ followed by
whitespace (or at a CJK full stop), never inside backticks.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
#: abbreviations after which a full stop does not end a sentence
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|no|fig)\.|\b[A-Z]\.)$", re.I)


def _code_mask(text: str) -> list[bool]:
    """Per character: whether it lies inside a backtick code span (``` or `)."""
    mask = [False] * len(text)
    inside = False
    i = 0
    while i < len(text):
        if text.startswith("```", i):
            for k in range(i, min(i + 3, len(text))):
                mask[k] = True
            inside = not inside
            i += 3
            continue
        if text[i] == "`":
            mask[i] = True
            inside = not inside
        elif inside:
            mask[i] = True
        i += 1
    return mask


def sentences(text: str) -> list[str]:
    """The sentences of `text`, each with its end mark (see the module docstring)."""
    mask = _code_mask(text)
    out: list[str] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        full_stop = ch in "。！？" or (ch in ".!?" and (i + 1 == n or text[i + 1].isspace())
                                      and not _ABBREV.search(text[start:i + 1]))
        if not mask[i] and full_stop:
            out.append(text[start:i + 1])
            start = i + 1
        elif not mask[i] and ch == "\n" and i + 1 < n and text[i + 1] == "\n":
            out.append(text[start:i])
            start = i + 2
            i += 1
        i += 1
    if start < n:
        out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def cut_words(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters (ellipsis included) at a space outside any
    code span; a text with no such space is cut before its first code span or at `limit`."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    mask = _code_mask(text)
    room = limit - len(ELLIPSIS)
    for i in range(room, 0, -1):
        if text[i] == " " and not mask[i] and not mask[i - 1]:
            return text[:i].rstrip(" ,;:—-") + ELLIPSIS
    # CJK text has no spaces: cut between two characters outside code
    for i in range(room, 0, -1):
        if not mask[i] and not mask[i - 1] and not (text[i - 1].isascii()
                                                     and text[i - 1].isalnum()
                                                     and text[i].isascii()
                                                     and text[i].isalnum()):
            return text[:i].rstrip() + ELLIPSIS
    return text[:room] + ELLIPSIS


def shorten(text: str, limit: int) -> str:
    """Whole lines of `text` while they fit in `limit`, then whole sentences of the next
    line; a first sentence that does not fit is cut by words (`cut_words`)."""
    if len(text) <= limit:
        return text
    kept = ""
    for line in text.split("\n"):
        joined = f"{kept}\n{line}" if kept else line
        if len(joined) <= limit:
            kept = joined
            continue
        room = limit - len(kept) - (1 if kept else 0)
        part = _sentences_within(line, room)
        if part:
            kept = f"{kept}\n{part}" if kept else part
        elif not kept:
            kept = cut_words(line, limit)
        break
    return kept


def _sentences_within(text: str, limit: int) -> str:
    kept = ""
    for s in sentences(text):
        joined = (kept + s if kept.endswith(("。", "！", "？")) else f"{kept} {s}".strip())
        if len(joined) > limit:
            break
        kept = joined
    return kept
