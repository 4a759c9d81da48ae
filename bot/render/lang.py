"""Finding English prose left in a Chinese answer (pure).

A Chinese answer keeps code, log quotes, identifiers, environment variables, numbers and
product names as they are ("NCCL_DEBUG=INFO", `ncclbot node env`, rank 5, ALLREDUCE, GPU);
what it must not keep is an English sentence. `latin_prose` finds the runs of ordinary
English words outside code spans and quotes; a run of two or more is prose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bot.logs.extract import NCCL_CODE_OF_TEXT

#: What a Chinese answer quotes rather than says: code spans and blocks, quotes, links, a
#: Slack link's target, `file:line` references.
_QUOTED = re.compile(
    r"```.*?```|`[^`\n]*`|“[^”\n]*”|「[^」\n]*」|‘[^’\n]*’|\"[^\"\n]*\""
    r"|(?<![A-Za-z])'[^\n]{1,200}?'(?![A-Za-z])"
    r"|<[^<>|\n]*\||https?://\S+|\b[\w.-]+\.(?:log|txt|py|cc|cu|cpp|h|hpp|yaml|json)(?::\d+)?",
    re.DOTALL)
_BLOCK = re.compile(r"```.*?```", re.DOTALL)
#: A line that quotes the log: `file:line  text` (the terminal's and Slack's evidence lines).
_EVIDENCE_LINE = re.compile(r"^\s*(?:[•\-]\s*)?[\w.\-/]+:\d+[: ]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.'/=+\-]*")
#: between two words of one run: spaces and light punctuation (not CJK, not a full stop)
_GLUE = re.compile(r"^[ \t,;:()\[\]/&-]*$")
#: Terms Chinese engineering text keeps in English (a rank, the watchdog, the store ...).
TERMS = frozenset((
    "rank", "ranks", "watchdog", "store", "barrier", "torchrun", "gloo", "micro", "batch",
    "tensor", "kernel", "socket", "peer", "host", "node", "nodes", "job", "docker",
    "container", "pod", "worker", "workers", "launcher", "dump", "dumps", "probe", "topo",
    "env", "hang", "xid", "bus", "ncclbot", "flight", "recorder", "fabric", "manager",
))


@dataclass(frozen=True)
class Leak:
    """One run of English prose in a Chinese text: the run and the line it stands on."""

    text: str
    line: str


def _identifier(word: str) -> bool:
    """A product name, identifier, env var, number or version rather than an English word."""
    w = word.strip("'.-/")
    if not w or not w.isascii():
        return True
    if any(c.isdigit() or c in "_=./+" for c in w) or w.count("-") >= 2:
        return True  # a version, path, env setting, or a slug (a card's id)
    letters = [c for c in w if c.isalpha()]
    if len(letters) >= 2 and all(c.isupper() for c in letters):
        return True  # NCCL, GPU, SIGKILL, IB
    return any(c.isupper() for c in w[1:])  # CamelCase, camelCase: ncclSystemError


def _prose_word(word: str) -> bool:
    w = word.strip("'.-/").lower()
    return not _identifier(word) and len(w) >= 2 and w not in TERMS


def latin_prose(text: str, quoted: Iterable[str] = ()) -> list[Leak]:
    """The runs of English prose in `text` (two or more ordinary English words in a row,
    outside code, quotes, links, evidence lines and the `quoted` texts, e.g. the log)."""
    sources = [*(q for q in quoted if q), *NCCL_CODE_OF_TEXT]
    out: list[Leak] = []
    for line in _BLOCK.sub("\n", text).splitlines():
        if _EVIDENCE_LINE.match(line):
            continue
        bare = _QUOTED.sub(" \x00 ", line)
        run: list[re.Match[str]] = []
        for m in [*_WORD.finditer(bare), None]:
            if m is not None and run and _GLUE.match(bare[run[-1].end():m.start()]):
                run.append(m)
                continue
            if run:
                _flush(bare, run, line, sources, out)
            run = [m] if m is not None else []
    return out


def _flush(bare: str, run: list[re.Match[str]], line: str, sources: list[str],
           out: list[Leak]) -> None:
    words = [m.group(0) for m in run]
    if sum(_prose_word(w) for w in words) < 2:
        return
    span = bare[run[0].start():run[-1].end()]
    if any(span in s for s in sources):
        return  # the log's own words
    out.append(Leak(span, line.strip()))


def evidence_in(line: int, text: str, lang: str) -> str:
    """An evidence line's text in `lang`: a sentence ncclbot wrote itself (line 0: a live
    hang's culprit, a Flight Recorder finding) in Chinese for zh; a line quoted from a log
    (line 1 on) as it is."""
    if lang != "zh" or line != 0:
        return text
    from bot.logs.crossrank import reason_in

    return reason_in(text, lang)
