"""Opening crash logs as streams of byte chunks: plain files, .gz, .zip (every member), stdin.

This is the I/O edge of log analysis. Everything downstream sees `LogSource`s
that yield bounded chunks, so memory stays flat however large the logs are.
"""

from __future__ import annotations

import gzip
import io
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast

from bot.errors import InputError

CHUNK = 1 << 22  # 4 MiB
#: The expansion ratio is only judged past this many decompressed bytes.
RATIO_FROM = 64 * 2**20
#: At most this many files are read from a directory given as input.
MAX_DIR_FILES = 4096
#: How far into a file text is looked for after a binary start.
TEXT_SEARCH = 1 << 20
ATTACH_HINT = (
    "Attach the crash log as text (.log/.txt), .gz or .zip: ideally the output of every rank, "
    "run with NCCL_DEBUG=INFO (and TORCH_NCCL_TRACE_BUFFER_SIZE=2000 for a Flight Recorder dump)."
)


@dataclass
class SourceStats:
    """What was read from one source, for the report and for clear messages."""

    name: str
    compressed_bytes: int = 0
    bytes_read: int = 0
    lines: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class LogSource:
    """One log stream: a display name and a function that opens it as binary."""

    name: str
    opener: Callable[[], BinaryIO]
    compressed_size: int | None = None
    closeable: bool = True
    stats: SourceStats = field(init=False)

    def __post_init__(self) -> None:
        self.stats = SourceStats(self.name, self.compressed_size or 0)


class Limits:
    """What one analysis may read: `max_bytes` in all (every file and archive member
    together), and compressed input may expand at most `max_ratio` times (per source and
    over all compressed sources together, so a zip of many modest members is stopped too).
    One `Limits` is one analysis's budget: it counts what was read. Once either limit
    stopped a source, the sources after it are not read at all (`stopped` says why): a bomb
    of many members costs one member's reading, not one chunk of each."""

    def __init__(self, max_bytes: int = 64 * 2**30, max_ratio: int = 200) -> None:
        self.max_bytes = max_bytes
        self.max_ratio = max_ratio
        self.read = 0  # bytes read so far, all sources
        self.read_compressed = 0  # of which from compressed sources
        self.compressed = 0  # compressed size of the compressed sources opened so far
        self.stopped = ""  # why reading stopped, once a limit was reached

    def expanded_too_much(self) -> bool:
        return (self.compressed > 0 and self.read_compressed > RATIO_FROM
                and self.read_compressed > self.max_ratio * self.compressed)


def text_source(name: str, text: str) -> LogSource:
    """A log held in memory (a corpus incident, a pasted excerpt) as a source."""
    data = text.encode("utf-8")
    return LogSource(name, lambda: io.BytesIO(data), len(data))


def expand_inputs(paths: Iterable[str], stdin: BinaryIO | None = None) -> list[LogSource]:
    """Turn CLI arguments into sources; archives contribute one source per member."""
    sources: list[LogSource] = []
    for raw in paths:
        if raw == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            sources.append(LogSource("<stdin>", _given(stream), closeable=False))
            continue
        path = Path(raw)
        if path.is_dir():  # a job's folder: every file in it (logs, Flight Recorder dumps)
            inside = sorted(p for p in path.rglob("*") if p.is_file()
                            and not p.name.startswith("."))[:MAX_DIR_FILES]
            if not inside:
                raise InputError(f"{raw} is a directory with no files in it", hint=ATTACH_HINT)
            for p in inside:  # named by their place in the folder: attempt_0/3/stderr.log
                for src in expand_inputs([str(p)], stdin):
                    src.name = _inside(path, p, src.name)
                    src.stats.name = src.name
                    sources.append(src)
            continue
        if not path.exists():
            raise InputError(f"{raw}: no such file", hint=ATTACH_HINT)
        try:
            with path.open("rb") as fh:
                head = fh.read(4)
        except OSError as exc:
            raise InputError(f"{raw}: cannot be read ({exc.strerror})") from exc
        if head.startswith(b"PK\x03\x04") or path.suffix.lower() == ".zip":
            sources.extend(_zip_members(path))
        elif head.startswith(b"\x1f\x8b"):
            sources.append(LogSource(path.name, _gzip_file(path), path.stat().st_size))
        else:
            sources.append(LogSource(path.name, _file(path), path.stat().st_size))
    return sources


def _inside(folder: Path, file: Path, name: str) -> str:
    """A file's name within a folder given as input (a zip member keeps its own name after
    the archive's)."""
    rel = file.relative_to(folder).as_posix()
    return rel + name[len(file.name):] if name.startswith(file.name) else name


def _given(stream: BinaryIO) -> Callable[[], BinaryIO]:
    return lambda: stream


def _file(path: Path) -> Callable[[], BinaryIO]:
    return lambda: path.open("rb")


def _gzip_file(path: Path) -> Callable[[], BinaryIO]:
    return lambda: cast("BinaryIO", gzip.open(path, "rb"))


def _zip_members(path: Path) -> list[LogSource]:
    try:
        archive = zipfile.ZipFile(path)
        infos = [i for i in archive.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(
            f"{path.name}: not a readable zip archive ({exc})", hint=ATTACH_HINT
        ) from exc
    if not infos:
        raise InputError(f"{path.name}: the zip archive holds no files", hint=ATTACH_HINT)
    out = []
    for info in infos:
        name = f"{path.name}:{info.filename}"
        opener = _zip_opener(path, info.filename)
        if info.filename.lower().endswith(".gz"):
            opener = _gunzip(opener)
        out.append(LogSource(name, opener, info.compress_size))
    return out


def _zip_opener(path: Path, member: str) -> Callable[[], BinaryIO]:
    def open_member() -> BinaryIO:
        return zipfile.ZipFile(path).open(member)  # type: ignore[return-value]

    return open_member


def _gunzip(opener: Callable[[], BinaryIO]) -> Callable[[], BinaryIO]:
    return lambda: gzip.GzipFile(fileobj=opener(), mode="rb")  # type: ignore[return-value]


def looks_binary(head: bytes) -> bool:
    """A chunk is binary when it has NUL bytes or mostly non-text bytes."""
    if not head:
        return False
    sample = head[:8192]
    if b"\x00" in sample:
        return True
    text_bytes = bytes(range(32, 127)) + b"\n\r\t\x1b\x0c\x08"
    nontext = len(sample.translate(None, text_bytes))
    # UTF-8 text (e.g. Chinese) has many high bytes; only flag if it does not decode.
    if nontext / len(sample) > 0.3:
        try:
            sample.decode("utf-8")
        except UnicodeDecodeError as exc:
            return exc.start < len(sample) - 4
    return False


def text_start(chunk: bytes) -> int | None:
    """Where text starts in a chunk that begins with binary data (a core dump's header, a
    stray NUL block before the log): the offset after the last NUL or non-text run in the
    first `TEXT_SEARCH` bytes from which the rest reads as text; None if it never does."""
    window = chunk[:TEXT_SEARCH]
    cut = max(window.rfind(b"\x00"), 0)
    while cut < len(window):
        nl = window.find(b"\n", cut)
        if nl < 0:
            return None
        rest = chunk[nl + 1:nl + 1 + 8192]
        if rest and not looks_binary(rest):
            return nl + 1
        cut = nl + 1
    return None


def read_chunks(source: LogSource, limits: Limits | None = None) -> Iterator[bytes]:
    """Yield the source's bytes in chunks, within the analysis's budget (`Limits`). What
    cannot be read is a note on the source (`stats.problems`), never an exception, so the
    other sources are still read: a binary file is skipped, text after a binary start is
    found, reading stops at the size and expansion limits."""
    limits = limits or Limits()
    stats = source.stats
    if limits.stopped:
        stats.problems.append(f"not read: {limits.stopped}")
        return
    try:
        stream = source.opener()
    except OSError as exc:
        stats.problems.append(f"cannot be opened ({exc}); skipped")
        return
    if stats.compressed_bytes:
        limits.compressed += stats.compressed_bytes
    try:
        first = True
        while True:
            try:
                chunk = stream.read(CHUNK)
            except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
                stats.problems.append(f"stopped reading after {stats.bytes_read} bytes: {exc}")
                return
            if not chunk:
                return
            if first:
                first = False
                if looks_binary(chunk):
                    start = text_start(chunk)
                    if start is None:
                        stats.problems.append(
                            f"skipped: this looks like a binary file, not a text log (read "
                            f"{len(chunk)} bytes). {ATTACH_HINT}")
                        return
                    stats.problems.append(f"skipped {start} bytes of binary data at the start")
                    chunk = chunk[start:]
            if limits.read + len(chunk) > limits.max_bytes:
                limits.stopped = (f"the analysis reached its size limit of {limits.max_bytes} "
                                  "bytes")
                stats.problems.append(f"stopped at the size limit of {limits.max_bytes} bytes "
                                      "for one analysis")
                return
            stats.bytes_read += len(chunk)
            limits.read += len(chunk)
            if stats.compressed_bytes:
                limits.read_compressed += len(chunk)
            if (stats.compressed_bytes and stats.bytes_read > RATIO_FROM
                    and stats.bytes_read > limits.max_ratio * stats.compressed_bytes) \
                    or limits.expanded_too_much():
                stats.problems.append(
                    f"stopped: the compressed input expands more than {limits.max_ratio}x "
                    "(possible zip bomb)")
                limits.stopped = (f"the compressed input before it expands more than "
                                  f"{limits.max_ratio}x (possible zip bomb)")
                return
            yield chunk
    finally:
        if source.closeable:
            stream.close()
